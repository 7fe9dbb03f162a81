# One target per intent. Every target builds/refreshes the virtual environment first,
# so on a fresh machine with only python3, `make lab` or `make test` is the whole set-up.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))

# Same thread count everywhere so stored outputs compare like with like.
export OMP_NUM_THREADS ?= 2
# Stored outputs are CPU outputs: tests and refreshes use the CPU unless told otherwise
# (`make test BLITZ_FORCE_CPU=0` runs the notebooks on your GPU; numbers may then differ).
export BLITZ_FORCE_CPU ?= 1
# Offline CIFAR-10 subset (see README): used by notebooks 04-05 when set. Defaults to the
# team's shared copy beside the checkout when there is one; empty means "download".
BLITZ_CIFAR10_SUBSET ?= $(abspath $(wildcard ../shared/data/cifar10-subset.npz))
export BLITZ_CIFAR10_SUBSET

LAB_PORT  ?= 8888
# Simply expanded, so the printed URL and the server share one random token.
ifndef LAB_TOKEN
LAB_TOKEN := $(shell $(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(24))')
endif
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: help venv lab test test-portable lint refresh clean html bench

help:
	@echo "make lab      - JupyterLab on notebooks/ at http://127.0.0.1:$(LAB_PORT) (token printed)"
	@echo "make test     - ruff, unit tests and nbval (strict) on every notebook"
	@echo "make test-portable - nbval again under other CPU kernels and thread counts"
	@echo "make refresh  - re-execute every notebook in place on the CPU (authors only)"
	@echo "make html     - offline teaching site in build/site (EXECUTE=1 re-runs notebooks first)"
	@echo "make bench    - the benchmarks in bench/ (side-by-side ratios; a few minutes)"
	@echo "make clean    - remove the environment, caches and build output"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# No news feed and no update check: classrooms are often offline.
lab: $(STAMP)
	@echo "JupyterLab: http://127.0.0.1:$(LAB_PORT)/lab?token=$(LAB_TOKEN)"
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) \
		--ServerApp.root_dir=notebooks --IdentityProvider.token=$(LAB_TOKEN) $(ROOT_FLAG) \
		--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Stored outputs of 04-05 come from the 6,000-image subset: tests always use it (from the
# file, or cut from the full download).
test test-portable refresh: export BLITZ_CIFAR10 = subset

test: lint
	$(BIN)/python -m pytest --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=600 \
		-p tests.notebook_timing

# The same stored outputs under other CPU kernels and thread counts (see CONTRIBUTING.md).
test-portable: $(STAMP)
	$(BIN)/python tools/test_portable.py

# Static site from the stored outputs (EXECUTE=1: re-execute in memory first); works offline.
html: $(STAMP)
	$(BIN)/python tools/build_site.py --out build/site $(if $(filter 1,$(EXECUTE)),--execute,)

refresh: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 $(NOTEBOOKS)

# Benchmarks print ratios; they are never part of `make test`. They use a GPU when present.
bench: BLITZ_FORCE_CPU = 0
bench: $(STAMP)
	$(BIN)/python bench/cifar10.py
	$(BIN)/python bench/ddp_scaling.py

clean:
	rm -rf $(VENV) build _build .pytest_cache .ruff_cache *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
