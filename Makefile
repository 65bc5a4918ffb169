# Everything runs from a local virtual environment that these targets create.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup install discover test lint typecheck unit bench

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
	$(BIN)/ruff check nfd tests bench

typecheck:
	$(BIN)/mypy

unit:
	$(BIN)/pytest -q

test: install lint typecheck unit

bench: install
	$(BIN)/python bench/run_all.py
