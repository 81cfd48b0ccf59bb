# Two commands on a fresh machine: `make demo` and `make test`. Each installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# The demo's own environment: the base package alone (orjson, click, cronsim), no dev tools.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: demo check test lint typecheck docs docs-serve bench bench-quick install clean

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

# The fast tier's trims: property tests at a fifth of their examples, and no plugin it does not use.
CHECK_OPTIONS := --hypothesis-profile quick -p no:schemathesis -p no:anyio

## The fast tier, for every change (under two minutes): unit, store conformance and in-process
## acceptance tests on the memory and SQLite backends (no subprocess, server, browser or
## PostgreSQL: those are tests/system and the postgres backend, which `make test` runs), then ruff.
check: $(STAMP)
	PARKWAY_TEST_BACKENDS=memory,sqlite $(BIN)/python -m pytest -q $(CHECK_OPTIONS) \
		tests/unit tests/store tests/acceptance
	$(BIN)/ruff check src tests benchmarks

## Everything: unit, store conformance, acceptance and system tests (processes, servers, the
## browser, the docs' examples, a smoke run of every benchmark) on every backend, PostgreSQL
## included; then lint, types, and the docs site built with --strict.
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

## Every benchmark at a small N, in seconds: a smoke run (tests/system/test_benchmarks.py runs it).
bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks.run --quick

clean:
	rm -rf $(VENV) $(DEMO_VENV) site .pytest_cache .mypy_cache .ruff_cache parkway-demo.db*
