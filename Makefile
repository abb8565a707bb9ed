# convo-analytics: `make help` lists the targets. Every target bootstraps what it
# needs on a machine that has only python3 and make: uv (installed with pip into
# .tools/ when it is not on PATH), then the locked environment in .venv/.

SHELL := /bin/bash
.DEFAULT_GOAL := help

export UV_PYTHON_DOWNLOADS := never
# Install packages with their bytecode compiled. Python never writes a .pyc where
# PYTHONDONTWRITEBYTECODE is set (as on this project's machines and CI), so without it every
# process compiled the sources of what it imports, each time: ~0.7 s for dagster in each of
# a Dagster run's step processes, seconds of pytest plugins in each test worker (D-BYTECODE).
export UV_COMPILE_BYTECODE ?= 1
export UV_PYTHON ?= python3
# Use the platform CA store, so that a TLS-intercepting proxy trusted by the machine works.
export UV_SYSTEM_CERTS ?= 1
SYSTEM_UV := $(shell command -v uv 2>/dev/null)
UV ?= $(if $(SYSTEM_UV),$(SYSTEM_UV),$(CURDIR)/.tools/bin/uv)
RUN := $(UV) run --frozen
HOST ?= 127.0.0.1
PORT ?= 8787
RECEIVER_PORT ?= 8788
DASHBOARD_PORT ?= 8501
CONVERSATIONS ?= 5000
DAYS ?= 30
SEED ?= 42
DEMO_DATA_DIR ?= $(CURDIR)/data

.PHONY: help install demo sandbox test test-bench lint format bench clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(CURDIR)/.tools/bin/uv:
	@echo "uv not found: installing it into .tools/ with pip"
	@python3 -m venv $(CURDIR)/.tools 2>/dev/null && $(CURDIR)/.tools/bin/python -m pip install -q uv \
	  || (rm -rf $(CURDIR)/.tools && python3 -m pip install -q --target $(CURDIR)/.tools/pkgs uv \
	      && mkdir -p $(CURDIR)/.tools/bin && ln -sf $(CURDIR)/.tools/pkgs/bin/uv $(CURDIR)/.tools/bin/uv)

.venv/.installed: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen
	@touch $@

install: .venv/.installed ## Install the locked environment into .venv

# The demo stops its servers on Ctrl-C, SIGTERM and SIGHUP (docs/cli.md, "make demo").
demo: install ## The sandbox, the whole pipeline, the dashboard (HOST, PORT, RECEIVER_PORT, DASHBOARD_PORT, CONVERSATIONS, DAYS, SEED, DEMO_DATA_DIR)
	@$(RUN) python pipelines/demo.py --host $(HOST) --port $(PORT) --receiver-port $(RECEIVER_PORT) \
	  --dashboard-port $(DASHBOARD_PORT) --conversations $(CONVERSATIONS) --days $(DAYS) --seed $(SEED) \
	  --data-dir $(DEMO_DATA_DIR)

sandbox: install ## Serve the sandbox in the foreground (HOST, PORT, CONVERSATIONS, DAYS, SEED)
	$(RUN) convo sandbox serve --host $(HOST) --port $(PORT) --conversations $(CONVERSATIONS) --days $(DAYS) --seed $(SEED)

lint: install ## ruff format --check, ruff check, mypy on src/
	$(RUN) ruff format --check src tests pipelines dashboards
	$(RUN) ruff check src tests pipelines dashboards
	$(RUN) mypy

format: install ## Format and fix what ruff can
	$(RUN) ruff format src tests pipelines dashboards
	$(RUN) ruff check --fix src tests pipelines dashboards

test: install lint ## Lint, then run the whole test suite (needs Debian's chromium and postgresql)
	@command -v chromium >/dev/null 2>&1 || { echo "make test needs Debian's chromium for the dashboard's browser tests:"; \
	  echo "  sudo apt-get install -y chromium     (.ci/run installs it)"; exit 1; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  echo "make test needs PostgreSQL's server (Debian's packages) for the lake and Dagster tests:"; \
	  echo "  sudo apt-get install -y postgresql     (.ci/run installs it)"; exit 1; }
	$(UV) run --frozen --group bench pytest -n 2 --dist loadfile

# Each benchmark once at its smallest sizes, with the bench group (dlt), so a benchmark cannot
# break unseen: part of `make test`; this target runs only those.
test-bench: install ## Check only that every benchmark still runs (smallest sizes; needs postgresql)
	$(UV) sync --frozen --group bench
	$(UV) run --frozen --group bench pytest -n 2 -m bench tests/test_bench.py

bench: install ## Run the benchmarks; each prints its figures and the sizes it ran on
	$(UV) sync --frozen --group bench
	$(UV) run --frozen --group bench python tests/bench/run.py $(BENCH_ARGS)

clean: ## Remove generated data and caches (keeps .venv)
	rm -rf data/* .pytest_cache .mypy_cache .ruff_cache .hypothesis
