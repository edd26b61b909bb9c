# Set-up and checks on a fresh machine. Everything installs into .venv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
LAB_PORT ?= 8888
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

.PHONY: help venv install lab hub demo test lint lint-js test-js bench clean slurm-lab slurm-lab-stop
SLURM_LAB ?= /tmp/pai-slurm-lab

help:
	@echo "make lab    install into $(VENV) and open JupyterLab with the workbench and the embedded cluster"
	@echo "make hub    install, then JupyterHub in front of the embedded cluster (pai hub start; HUB_AUTH=dummy to try)"
	@echo "make demo   run the quickstart headless: validate the example jobs, run them, print states and logs"
	@echo "make test   install and run the whole suite (ruff check + format, mypy, eslint, vitest, pytest)"
	@echo "make test-fast  the same lint + the unit tests (the inner loop, ~30 s)"
	@echo "make test-binder  the binder install test alone (~5 min; not in make test, CI runs it)"
	@echo "make bench  run the benchmarks; figures beside their baselines, also in .bench/results.json"
	@echo "make docs   build the documentation site into .docs-site/ (strict: broken links fail)"
	@echo "make slurm-lab  (root) JupyterLab on a local two-node Slurm cluster in $(SLURM_LAB); slurm-lab-stop ends it"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	@echo "== installing pai_jupyter into $(VENV): the Python packages, then npm builds the JupyterLab extension"
	@echo "   (the first time takes several minutes; 'Building editable for pai_jupyter' is the npm build)"
	$(BIN)/python -m pip install --progress-bar on -e '.[test,lab,hub,mlflow]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

venv install: $(STAMP)

# Lab's own terminals get the venv's bin on their PATH (pai, jupyter); "Python on PAI" is in the launcher: a kernelspec
# in the venv (--sys-prefix), not the user's Jupyter dir, whose kernels every Jupyter of the user lists (a task's own
# JupyterLab too, where it would start a job from inside a job)
PAI_KERNELSPEC := $(VENV)/share/jupyter/kernels/pai/kernel.json
lab: $(STAMP)
	$(BIN)/pai cluster start --quiet || true
	@test -f "$(PAI_KERNELSPEC)" || $(BIN)/pai kernel install --sys-prefix
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter lab --no-browser --port $(LAB_PORT) $(ROOT_FLAG) \
		--config=jupyter-config/make_lab_config.py --notebook-dir=notebooks \
		--ServerApp.default_url=/lab/tree/quickstart.ipynb

# JupyterHub in front of the embedded cluster (docs/hub.md): configurable-http-proxy from npm into hub/node_modules,
# then `pai hub start` (PAM sign-in; HUB_AUTH=dummy for trying, HUB_PORT for another port; pai hub stop ends it)
HUB_AUTH ?= pam
HUB_PORT ?= 8000
hub/node_modules/.package-lock.json: hub/package-lock.json
	cd hub && npm ci --no-audit --no-fund

hub: $(STAMP) hub/node_modules/.package-lock.json
	$(BIN)/pai hub start --authenticator $(HUB_AUTH) --port $(HUB_PORT)

# a local two-node Slurm cluster (tests/slurm/cluster.sh) and a daemon of its own home handing jobs to it; Lab's
# workspace and settings are its own too (`make lab`'s workspace would reopen its notebooks, and start their "Python
# on PAI" kernels on this cluster at every load)
slurm-lab: $(STAMP)
	bash tests/slurm/cluster.sh start $(SLURM_LAB)/slurm
	mkdir -p $(SLURM_LAB)/lab/workspaces $(SLURM_LAB)/lab/settings
	export SLURM_CONF=$(SLURM_LAB)/slurm/etc/slurm.conf PAI_JUPYTER_HOME=$(SLURM_LAB)/home \
		JUPYTERLAB_WORKSPACES_DIR=$(SLURM_LAB)/lab/workspaces JUPYTERLAB_SETTINGS_DIR=$(SLURM_LAB)/lab/settings \
		PATH="$(abspath $(BIN)):$$PATH"; \
	$(BIN)/pai cluster start --backend slurm --quiet && \
	$(BIN)/jupyter lab --no-browser --port $(LAB_PORT) $(ROOT_FLAG) --notebook-dir=notebooks \
		--config=jupyter-config/make_lab_config.py --ServerApp.default_url=/lab/tree/quickstart.ipynb

slurm-lab-stop:
	PAI_JUPYTER_HOME=$(SLURM_LAB)/home $(BIN)/pai cluster stop || true
	bash tests/slurm/cluster.sh stop $(SLURM_LAB)/slurm

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
	cd labextension && PAI_PYTHON=$(abspath $(BIN))/python npm test --silent

# pytest-xdist workers: most tests wait on a daemon, a browser or a task, so 4 keep 2 cores busy; a module's tests
# share one worker (its fixtures start once) and the Slurm tests another (tests/conftest.py)
TEST_WORKERS ?= 4
XDIST = -n $(TEST_WORKERS) --dist loadgroup

# the binder install test (a fresh venv + npm build, ~5 min) runs on its own: `make test-binder`, which CI runs too
# each run's temporary files under a directory of its own (kept when a test failed): pytest makes
# /tmp/pytest-of-<user> 0700 at every start, and another pytest starting meanwhile cut the suite's tasks of other
# accounts off from their directories
test: $(STAMP) lint test-js
	tmp=$${TMPDIR:-/tmp}/pai-test-run-$$$$; PAI_TEST_HYPOTHESIS=full $(BIN)/python -m pytest -m "not binder" $(XDIST) \
		--basetemp=$$tmp $(PYTEST_ARGS) && rm -rf $$tmp

.PHONY: test-fast test-binder
# the inner loop (about 30 s on 2 cores): lint and the unit tests, which start no daemon, engine or browser
test-fast: $(STAMP) lint
	PAI_TEST_HYPOTHESIS=quick $(BIN)/python -m pytest tests/unit -n 2 --dist loadgroup $(PYTEST_ARGS)

test-binder: $(STAMP)
	$(BIN)/python -m pytest -m binder $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run

.PHONY: docs
docs: $(STAMP)
	$(BIN)/mkdocs build --strict
	@echo "the site is in .docs-site/ (open .docs-site/index.html)"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .bench .docs-site
