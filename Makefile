# Everything runs from a local virtual environment that these targets create.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup install discover test lint typecheck unit bench image-test image-lock

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

unit:
	$(BIN)/pytest -q

test: install lint typecheck unit

bench: install
	$(BIN)/python bench/run_all.py

# Builds the Dockerfile with podman and runs the image as the manifests do (Debian 12,
# root: installs podman, runc and mmdebstrap when missing). CI runs it beside `test`.
image-test: install
	$(BIN)/python scripts/image_test.py

# Re-pins requirements-image.txt: nfd alone, installed into a clean environment.
image-lock: $(BIN)/python
	rm -rf .image/lock && $(PY) -m venv .image/lock
	.image/lock/bin/pip install -q --upgrade 'pip>=25.2'
	.image/lock/bin/pip install -q --only-binary=:all: .
	{ sed -n '/^#/p' requirements-image.txt; .image/lock/bin/pip freeze --exclude nfd; } > requirements-image.txt.new
	mv requirements-image.txt.new requirements-image.txt
	rm -rf .image/lock
