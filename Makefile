# commsched developer entry points. Everything runs inside a local virtual environment (.venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup sysdeps demo test test-fast test-slow lint typecheck bench clean docs mutants

#: Debian packages the runtime tests use (headless Chromium for the status page, tcpdump for captures,
#: nftables for transparent enforcement on unmodified jobs, Slurm and munge for the Slurm integration,
#: prometheus for the scrape test)
SYSDEPS := chromium tcpdump iproute2 nftables slurm-wlm slurmctld slurmd slurm-client munge prometheus
#: the PyTorch the runtime's integration is tested with (a CPU build; a newer one pulls CUDA packages)
TORCH_VERSION := 2.13.0

#: what `make demo` needs: commsched, its core dependencies and the plot extra (joblib for its workers);
#: no test tools, no torch, no test plug-in. The full install (`make test`, `make setup`) marks it done too.
DEMO_STAMP := $(VENV)/.installed-demo

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet 'torch==$(TORCH_VERSION)'
	$(BIN)/python -m pip install --quiet -e '.[dev,torch]'
	$(BIN)/python -m pip install --quiet --no-deps -e tests/api/pkg_mypolicy
	touch $(DEMO_STAMP) $(STAMP)

$(DEMO_STAMP): pyproject.toml
	@echo "demo [1/3]: creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "demo [2/3]: installing commsched with its plot extra (numpy, scipy, numba, matplotlib, ...; no test tools, no torch)"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[plot,parallel]'
	@touch $(DEMO_STAMP)

setup: $(STAMP)

## System packages for the runtime tests: installed with apt-get when run as root, else only reported
## (the tests that need them then skip with the reason).
sysdeps:
	@missing=""; for p in $(SYSDEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "sysdeps: missing$$missing (not root or no apt-get): the tests that need them will skip"; fi

## Main job: the embedded default scenario (installs only what it needs; `make test` installs the rest).
demo: $(DEMO_STAMP)
	@echo "demo [3/3]: commsched demo (the simulator's kernels are compiled first, apart from any policy's time)"
	@$(BIN)/commsched demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/python tools/check_sizes.py

## The package (files in pyproject's [tool.mypy]), then the benchmark and analysis scripts, strict too.
typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy benchmarks/*.py

#: pytest workers of `make test` (pytest-xdist) for the tests that neither run jobs on the testbed nor time
#: traffic; those (marker `network`, tests/conftest.py: NETWORK) run after them, one after another
TEST_WORKERS ?= 2

## The whole test suite: lint, strict typing, every test (slow ones included, on TEST_WORKERS workers); then the tests
## that run jobs on the testbed or time traffic (marker `network`), serially with nothing else running; then the timing checks
## (marker `timing`) last, serially, with nothing else of the suite running (they print their figures as
## FIGURE lines and never skip on load); then the planted-mutation check (tools/mutants.py: one-line
## mutants of core modules, each against its tests, two at a time in checkouts of their own; about 1 minute).
test: sysdeps lint typecheck
	$(BIN)/pytest -q -p no:cacheprovider -m "not timing and not network" -n $(TEST_WORKERS)
	$(BIN)/pytest -q -p no:cacheprovider -m "network and not timing"
	$(BIN)/pytest -q -p no:cacheprovider -m timing -s -rs
	$(BIN)/python tools/mutants.py

## The planted-mutation check alone (after an interrupted run: `python tools/mutants.py --restore`).
mutants: $(STAMP)
	$(BIN)/python tools/mutants.py

## Fast inner loop: skips tests marked slow.
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

## Reference documentation (MkDocs + mkdocstrings), warnings as errors; the site goes to site/.
docs: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	$(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
