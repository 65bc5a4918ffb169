# Everything runs from a local virtual environment that these targets create.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup install discover test lint typecheck unit bench image-test image-lock realnode

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade 'pip>=25.2'  # its console scripts do not import re

# The package is installed (not run from the source tree), so tests see what users get.
install: $(BIN)/python
	$(BIN)/pip install -q '.[test]'

setup: install

discover: $(BIN)/python
	$(BIN)/pip install -q .
	$(BIN)/nfd discover

lint:
	$(BIN)/ruff check nfd tests bench scripts
	$(BIN)/ruff format --check nfd tests bench scripts

typecheck:
	$(BIN)/mypy

# The real-node suite needs a real node (make realnode); the e2e suite runs on the fake here.
unit:
	$(BIN)/pytest -q --ignore=tests/realnode

test: install lint typecheck unit

bench: install
	$(BIN)/python bench/run_all.py

# Builds the Dockerfile with podman and runs the image as the manifests do (Debian 12,
# root: installs podman, runc and mmdebstrap when missing). CI runs it beside `test`.
image-test: install
	$(BIN)/python scripts/image_test.py --save .image/nfd.tar

# nfd installed from the image on a real single-node cluster (root; ../shared/realcluster):
# the node comes up, the image is loaded, the real-node suite and the e2e suite run on it.
# Run image-test first (it builds and saves the image). The node is left up: `down` it.
REALCLUSTER ?= ../shared/realcluster
REAL_KUBECONFIG ?= /var/lib/realcluster/admin.kubeconfig
# kubectl from the test extra (a known version), for the cluster's scripts and the suite.
realnode: export PATH := $(CURDIR)/$(BIN):$(PATH)
realnode: install
	$(REALCLUSTER)/up
	$(REALCLUSTER)/load-image --tar .image/nfd.tar
	NFD_REALNODE=1 NFD_REALNODE_REQUIRED=1 NFD_REALCLUSTER_DIR=$(REALCLUSTER) \
	  NFD_REALNODE_KUBECONFIG=$(REAL_KUBECONFIG) $(BIN)/pytest -q --durations=10 tests/realnode
	kubectl --kubeconfig=$(REAL_KUBECONFIG) apply -f deploy/base/crd/  # the e2e tests' NodeFeature objects
	NFD_E2E_REAL_CLUSTER=1 NFD_E2E_REQUIRED=1 NFD_E2E_KUBECONFIG=$(REAL_KUBECONFIG) \
	  $(BIN)/pytest -q --durations=5 tests/e2e; rc=$$?; \
	  kubectl --kubeconfig=$(REAL_KUBECONFIG) delete --ignore-not-found -f deploy/base/crd/; exit $$rc

# Re-pins requirements-image.txt: nfd alone, installed into a clean environment.
image-lock: $(BIN)/python
	rm -rf .image/lock && $(PY) -m venv .image/lock
	.image/lock/bin/pip install -q --upgrade 'pip>=25.2'
	.image/lock/bin/pip install -q --only-binary=:all: .
	{ sed -n '/^#/p' requirements-image.txt; .image/lock/bin/pip freeze --exclude nfd; } > requirements-image.txt.new
	mv requirements-image.txt.new requirements-image.txt
	rm -rf .image/lock
