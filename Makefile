# commsched developer entry points. Everything runs inside a local virtual environment (.venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-fast test-slow lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,torch]'
	touch $(STAMP)

setup: $(STAMP)

## Main job: the embedded default scenario.
demo: $(STAMP)
	$(BIN)/commsched demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

## The whole test suite: lint, strict typing, every test (slow ones included).
test: lint typecheck
	$(BIN)/pytest -q -p no:cacheprovider

## Fast inner loop: skips tests marked slow.
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
