# Set-up and checks on a fresh machine. Everything installs into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
LAB_PORT ?= 8888
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

.PHONY: help venv install lab demo test lint lint-js test-js bench clean

help:
	@echo "make lab    install into $(VENV) and open JupyterLab with the workbench and the embedded cluster"
	@echo "make demo   run the quickstart headless: validate the example jobs, run them, print states and logs"
	@echo "make test   install and run the whole suite (ruff check + format, mypy, eslint, vitest, pytest)"
	@echo "make test-fast  the same lint + the tests without the docker, browser or slow marks (the inner loop)"
	@echo "make bench  run the benchmarks; figures beside their baselines, also in .bench/results.json"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	@echo "== installing pai_jupyter into $(VENV): the Python packages, then npm builds the JupyterLab extension"
	@echo "   (the first time takes several minutes; 'Building editable for pai_jupyter' is the npm build)"
	$(BIN)/python -m pip install --progress-bar on -e '.[test,lab]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

venv install: $(STAMP)

# Lab's own terminals get the venv's bin on their PATH (pai, jupyter); "Python on PAI" is in the launcher
lab: $(STAMP)
	$(BIN)/pai cluster start --quiet || true
	@$(BIN)/jupyter kernelspec list | grep -qE '^ +pai ' || $(BIN)/pai kernel install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter lab --no-browser --port $(LAB_PORT) $(ROOT_FLAG) \
		--config=jupyter-config/make_lab_config.py --notebook-dir=notebooks \
		--ServerApp.default_url=/lab/tree/quickstart.ipynb

demo: $(STAMP)
	$(BIN)/python -m pai_jupyter.demo

lint: $(STAMP) lint-js
	$(BIN)/ruff check pai_jupyter tests
	$(BIN)/ruff format --check pai_jupyter tests
	$(BIN)/mypy

# the labextension's TypeScript: eslint + prettier, and its vitest unit tests (node_modules from the pip build)
labextension/node_modules/.package-lock.json: labextension/package-lock.json
	cd labextension && npm ci --no-audit --no-fund

lint-js: labextension/node_modules/.package-lock.json
	cd labextension && npm run --silent lint

test-js: labextension/node_modules/.package-lock.json
	cd labextension && npm test --silent

test: $(STAMP) lint test-js
	$(BIN)/python -m pytest $(PYTEST_ARGS)

.PHONY: test-fast
test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -m "not docker and not browser and not slow" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .bench
