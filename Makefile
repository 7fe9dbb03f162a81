# One target per intent. Every target builds/refreshes the virtual environment first,
# so on a fresh machine with only python3, `make lab` or `make test` is the whole set-up.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The lessons are the notebooks _toc.yml lists (tools/lessons.py): a tool given no notebook
# (run_notebooks, save_cells, slides, lesson_size, i18n, build_site) reads that list.

# How the notebooks run under test (CPU, two threads, the CIFAR-10 subset) is defined once, in
# tools/harness/contract.py: pytest, `make refresh` and `make test-gpu` apply it themselves.
# `make lab`, `make grade`, `make bench` and `make html EXECUTE=1` use the team's offline subset beside the
# checkout when the full dataset cannot be downloaded (see README).
BLITZ_CIFAR10_SUBSET ?= $(abspath $(wildcard ../shared/data/cifar10-subset.npz))
lab hub grade bench html test-full-data: export BLITZ_CIFAR10_SUBSET := $(BLITZ_CIFAR10_SUBSET)



.PHONY: help generate venv lab hub hub-lessons hub-disk assignments grade grade-tools homework collect data-link test test-e2e test-portable test-full-data test-gpu lint utils refresh clean clean-runs html bench stress-ddp translations

help:
	@echo "make lab      - JupyterLab on notebooks/ at 127.0.0.1 (LAB_PORT, default 8888; URL with token printed;"
	@echo "               your own token from the environment, never make's command line: LAB_TOKEN=... make lab)"
	@echo "make hub      - JupyterHub for a class (as root): a login, Unix account and Lab per student,"
	@echo "               the lessons by one nbgitpuller link; 127.0.0.1:8000 unless HUB_IP (TEACHING.md)"
	@echo "make hub-lessons - a graded course (HUB_COURSE=graded): your latest commit to the class,"
	@echo "               without the solutions"
	@echo "make test     - ruff, unit tests and nbval (strict) on every notebook (a few minutes)"
	@echo "make test-e2e - what a person starts: every notebook in \`make lab\`'s kernels and in the zip,"
	@echo "               the site and decks in Chromium, Lab and RISE, torchrun launches, a fresh Python"
	@echo "make test-portable - nbval again under other CPU kernels and thread counts"
	@echo "make test-full-data - notebooks 04 and 05 on a 50,000-image CIFAR-10 built from the subset"
	@echo "make test-gpu - every notebook on your GPU (their asserts check it), unit tests on it"
	@echo "make lint     - ruff check and ruff format --check (.py and .ipynb)"
	@echo "make utils    - rewrite utils' lesson modules from the notebooks' cells tagged save"
	@echo "make generate - every generated file (utils, slide metadata, times, zh notebooks), in order"
	@echo "make refresh  - re-execute every notebook in place on the CPU, then make generate (authors)"
	@echo "make assignments - nbgrader assignments from the lessons, without solutions, in"
	@echo "               build/assignments/<en|zh>/release/ (hand out that folder)"
	@echo "make grade LESSON=01 SUBMISSIONS=folder [COURSE_LANG=zh] - grades.csv, feedback per student"
	@echo "               (as root: each submission runs as a throw-away user; see TEACHING.md)"
	@echo "make homework LESSON=01 - hand a lesson's homework out on the hub (Lab's Assignment List)"
	@echo "make collect LESSON=01 - collect the hub's hand-ins, grade them, release the feedback"
	@echo "make grade-tools - install bubblewrap (Debian, as root): the grader sandboxes each submission"
	@echo "make html     - offline teaching site in build/site (EXECUTE=1 re-runs notebooks first)"
	@echo "make translations - notebooks/zh from notebooks/*.ipynb + translations/zh (tools/authoring/i18n.py)"
	@echo "make bench    - the benchmarks in bench/ (side-by-side ratios; a few minutes)"
	@echo "make stress-ddp - the DDP scripts launched 100 times each: failures / runs (about 45 min)"
	@echo "make clean    - remove what the build and the tools wrote (site, caches, .venv); says what it kept"
	@echo "make clean-runs - remove the notebooks' runs and checkpoints (notebooks/.runs ...); data stays"
	@echo "make venv     - only create or update .venv (every target does it first)"
	@echo "make data-link - link notebooks/zh/data to notebooks/data (make lab does it)"

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --no-deps --no-build-isolation -e .
	@# nbgrader (the class grader, make grade) brings two Lab extensions a learner's Lab does not
	@# want, its own and Notebook 7's: RISE's slideshow app loads them even when Lab disables
	@# them, and Notebook's broke it ("The getter for the shared module is not a function")
	rm -rf $(VENV)/share/jupyter/labextensions/@jupyter/nbgrader \
		$(VENV)/share/jupyter/labextensions/@jupyter-notebook
	@touch $(STAMP)

# JupyterLab on notebooks/ at 127.0.0.1 (tools/publishing/lab.py): `LAB_PORT=8890 make lab` picks the port,
# `LAB_TOKEN=... make lab` the token (random otherwise). make hands both to the recipe in its
# environment, never on a command line, which every user can read (ps). `make lab
# LAB_TOKEN=...` would put the token in make's own command line: refused before anything runs.
ifeq ($(origin LAB_TOKEN),command line)
ifneq ($(filter lab,$(MAKECMDGOALS)),)
$(error make lab: LAB_TOKEN on make's command line is visible to every user (ps); give it in the environment instead: LAB_TOKEN=... make lab)
endif
endif
lab: $(STAMP) data-link
	$(BIN)/python -m tools.publishing.lab

# JupyterHub for a class (tools/teaching/hub.py, tools/teaching/jupyterhub_config.py; README,
# TEACHING.md): the hub's pins on top of the venv, and its proxy from npm into
# tools/teaching/proxy/node_modules (the lock file's exact versions; never a global install).
HUB_STAMP  := $(VENV)/.hub-installed
HUB_PROXY  := tools/teaching/proxy/node_modules/.package-lock.json
hub: $(STAMP) $(HUB_STAMP) $(HUB_PROXY) data-link
	$(BIN)/python -m tools.teaching.hub

# A graded course (HUB_COURSE=graded): your latest commit handed to the class, without the
# solutions (tools/teaching/classcopy.py); as root beside `make hub`, with its HUB_* settings.
hub-lessons: $(STAMP)
	$(BIN)/python -m tools.teaching.hub lessons

# Each student's disk (home and /tmp): this machine's filesystem has no quota (TEACHING.md).
hub-disk: $(STAMP)
	$(BIN)/python -m tools.teaching.classroom disk

$(HUB_STAMP): requirements-hub.txt $(STAMP)
	$(BIN)/python -m pip install -r requirements-hub.txt
	@touch $(HUB_STAMP)

$(HUB_PROXY): tools/teaching/proxy/package-lock.json
	cd tools/teaching/proxy && npm ci --no-audit --no-fund

# One CIFAR-10 download for both languages: the Chinese notebooks run in notebooks/zh and
# reach the English notebooks' data/ through a link (a folder already there is left alone).
data-link:
	@mkdir -p notebooks/data
	@test -e notebooks/zh/data || test -L notebooks/zh/data || ln -s ../data notebooks/zh/data

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# pytest's options and environment for the notebooks: pyproject.toml and tools/harness/contract.py.
# The tests marked e2e start what a person starts and run in `make test-e2e` instead.
test: lint
	$(BIN)/python -m pytest --nbval -m "not e2e"

# What a learner and a teacher start, started as they start it (the tests marked e2e): every
# cell of the five notebooks in kernels of `make lab` run from this shell's environment (no
# test contract) and in the unpacked zip, the site and decks in Chromium, JupyterLab and
# RISE, the DDP scripts under torchrun, the core path in a fresh Python, and (as root) the
# class: `make hub` with three students, the grader on a class of submissions. The 25 slowest
# are listed at the end: where CI's time goes.
test-e2e: $(STAMP) $(HUB_STAMP) $(HUB_PROXY) data-link grade-tools
	$(BIN)/python -m pytest -m e2e tests --durations=25

# The same stored outputs under other CPU kernels and thread counts (see CONTRIBUTING.md).
test-portable: $(STAMP)
	$(BIN)/python -m tools.harness.portable

# Notebooks 04 and 05 on the full dataset's size: a 50,000 / 10,000-image torchvision folder
# built from the subset in a temporary folder (tools/harness/full_from_subset.py), every cell run
# (no output comparison: the stored outputs come from the subset). The folder is removed.
test-full-data: $(STAMP)
	@test -f "$(BLITZ_CIFAR10_SUBSET)" || { echo "make test-full-data: needs the subset file: set BLITZ_CIFAR10_SUBSET=/path/to/cifar10-subset.npz (see README)"; exit 2; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BIN)/python -m tools.harness.full_from_subset "$$tmp" --subset "$(BLITZ_CIFAR10_SUBSET)" && \
	BLITZ_CIFAR10=full BLITZ_CIFAR10_ROOT="$$tmp" $(BIN)/python -m tools.authoring.run_notebooks \
		--out-dir "$$tmp/executed" notebooks/04_cifar10.ipynb notebooks/05_data_parallel.ipynb

# A teacher's check of a GPU machine: every notebook executed on the accelerator (no output
# comparison: the numbers differ from the stored CPU ones, the notebooks' asserts are the
# check), then the unit tests (not those marked e2e, which start browsers, a hub and Lab) without
# the CPU opt-out. Both run; either failing fails.
test-gpu: export BLITZ_FORCE_CPU = 0
test-gpu: $(STAMP)
	@rc=0; $(BIN)/python -m tools.authoring.run_notebooks || rc=1; \
	$(BIN)/python -m pytest tests -q -m "not e2e" || rc=1; exit $$rc

# The Chinese notebooks: the English ones with the catalogs' markdown (same code and outputs).
# `tools/authoring/i18n.py check` lists what is untranslated or stale; translations/zh/glossary.md says how.
translations: $(STAMP)
	$(BIN)/python -m tools.authoring.i18n build

# Static site from the stored outputs (EXECUTE=1: re-execute in memory first); works offline.
# EXECUTE is 1, true, yes or on, or 0, false, no, off or nothing; anything else is refused
# before anything runs, so a typo never builds a site other than the one asked for.
EXECUTE_YES := 1 true yes on TRUE YES ON True Yes On
EXECUTE_NO := 0 false no off FALSE NO OFF False No Off
ifneq ($(filter html,$(MAKECMDGOALS)),)
ifneq ($(strip $(EXECUTE)),)
ifneq ($(words $(EXECUTE))$(filter $(EXECUTE_YES) $(EXECUTE_NO),$(EXECUTE)),1$(strip $(EXECUTE)))
$(error make html: EXECUTE='$(EXECUTE)' is neither a yes nor a no: EXECUTE=1 (or true, yes, on) re-runs the notebooks first, EXECUTE=0 or none does not)
endif
endif
endif
html: $(STAMP)
	$(BIN)/python -m tools.publishing.build_site --out build/site $(if $(filter $(EXECUTE_YES),$(strip $(EXECUTE))),--execute,)

# Homework (tools/teaching/): each lesson as an nbgrader assignment (build output, never
# committed), and the class grader. LESSON and SUBMISSIONS are checked by the grader itself;
# COURSE_LANG=zh grades the Chinese assignment (LANG is the locale's); GRADE_ARGS passes
# --cell-timeout, --timeout, --max-mb or --out.
assignments: $(STAMP)
	$(BIN)/python -m tools.teaching.assignments

# The grader isolates each submission with bubblewrap (tools/teaching/sandbox.py) and says so in
# one line when it is missing; `make grade-tools` (as root, Debian) installs what it runs.
grade-tools:
	@command -v bwrap >/dev/null && command -v setpriv >/dev/null && command -v useradd >/dev/null \
		|| { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			bubblewrap util-linux passwd; }

# Checked when make reads this file, before the venv stamp: without a folder the grader would
# take the current one (the checkout) as the class.
ifneq ($(filter grade,$(MAKECMDGOALS)),)
ifeq ($(strip $(SUBMISSIONS)),)
$(error make grade needs SUBMISSIONS, the folder of submitted notebooks: make grade LESSON=01 SUBMISSIONS=folder)
endif
endif
grade: $(STAMP) grade-tools
	$(BIN)/python -m tools.teaching.grade --lesson "$(LESSON)" --submissions "$(SUBMISSIONS)" \
		--lang "$(or $(COURSE_LANG),en)" $(GRADE_ARGS)

# Homework on the hub (tools/teaching/homework.py), as root beside `make hub` (same HUB_SRV):
# `make homework LESSON=01` hands the lesson's assignment out through nbgrader's exchange (the
# students fetch and submit it in Lab's Assignment List); `make collect LESSON=01` collects the
# hand-ins, grades them as make grade does (GRADE_ARGS) and releases each student's feedback.
ifneq ($(filter homework collect,$(MAKECMDGOALS)),)
ifeq ($(strip $(LESSON)),)
$(error make $(filter homework collect,$(MAKECMDGOALS)) needs LESSON, the lesson's number: make $(firstword $(filter homework collect,$(MAKECMDGOALS))) LESSON=01)
endif
endif
homework: $(STAMP) $(HUB_STAMP)
	$(BIN)/python -m tools.teaching.homework release --lesson "$(LESSON)"

collect: $(STAMP) $(HUB_STAMP) grade-tools
	$(BIN)/python -m tools.teaching.homework collect --lesson "$(LESSON)" $(GRADE_ARGS)

# Lesson code reused by later lessons: utils/<lesson>.py from the cells tagged `save`.
utils: $(STAMP)
	$(BIN)/python -m tools.authoring.save_cells write

# Stored outputs, without timestamps, and the slide metadata derived from the headings
# (tools/authoring/slides.py). The Chinese notebooks carry the same outputs: they are rebuilt after.
refresh: generate
	$(BIN)/python -m tools.authoring.run_notebooks --inplace
	$(BIN)/python -m tools.authoring.generate

# Every generated file (utils' lesson modules, slide metadata, learner and run times, the
# Chinese notebooks) in the one right order: tools/authoring/generate.py. `make test` checks them.
generate: $(STAMP)
	$(BIN)/python -m tools.authoring.generate

# Benchmarks print ratios; they are never part of `make test`. They use a GPU when present.
bench: $(STAMP)
	$(BIN)/python bench/cifar10.py
	$(BIN)/python bench/ddp_scaling.py

# Do the DDP scripts end cleanly every time? ddp_minimal.py (notebook 05) and
# scripts/train_ddp.py, 100 launches each, plain and with an extra sitecustomize; prints
# failures / runs. A stress command, never part of `make test`.
stress-ddp: $(STAMP)
	$(BIN)/python bench/stress_ddp.py --runs $(or $(RUNS),100)

# Only what the build and the tools wrote (tools/clean.py: the site's files its own record
# lists, unchanged; the tests' screenshots; caches; .venv when make installed it), with the
# system's Python, as .venv goes. It names what it kept: your files in build/, and the
# notebooks' runs and checkpoints (a learner's trained models), which only `make clean-runs`
# removes (.runs/, also of the translated notebooks in notebooks/zh, and the older
# checkpoints/ and runs/). notebooks/data/ stays: it is the CIFAR-10 download (170 MB),
# which a classroom without internet cannot redo.
clean:
	@$(PYTHON) -m tools.clean

clean-runs:
	@$(PYTHON) -m tools.clean --runs
