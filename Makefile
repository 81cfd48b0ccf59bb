# Two commands on a fresh machine: `make demo` and `make test`. Each installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# The demo's own environment: the base package alone (orjson, click, cronsim), no dev tools.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: demo test lint typecheck docs docs-serve bench install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

$(DEMO_STAMP): pyproject.toml
	$(PY) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q .
	touch $(DEMO_STAMP)

## The main job: a small, real scenario on the embedded SQLite default (base install only).
demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/parkway demo

## The whole test suite (unit, store conformance, acceptance, the docs' examples), then lint,
## types, and the docs site built with --strict.
test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

## The docs site, into site/ (open site/index.html); docs-serve serves it with live reload.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

## Benchmarks (not part of the tests); DBOS is measured too when the `bench` extra is installed.
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) $(DEMO_VENV) site .pytest_cache .mypy_cache .ruff_cache parkway-demo.db*
