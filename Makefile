# Two commands on a fresh machine: `make demo` and `make test`. Each installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck bench install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## The main job: a small, real scenario on the embedded SQLite default.
demo: $(STAMP)
	$(BIN)/parkway demo

## The whole test suite (unit, store conformance, acceptance), then lint and types.
test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

## Benchmarks (not part of the tests); DBOS is measured too when the `bench` extra is installed.
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache parkway-demo.db*
