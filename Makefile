# Attention Lab: two commands set everything up on a fresh machine.
#   make lab   -> venv + install + kernel, then JupyterLab on notebooks/
#   make test  -> venv + install + kernel, then ruff, pytest, nbval
# Installs are pinned by constraints.txt (the versions the course was tested with);
# `make upgrade-check` tries the newest versions in a scratch venv and runs the unit tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.attnlab-installed
CONSTRAINTS := constraints.txt
UPGRADE_VENV ?= /tmp/attnlab-upgrade
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: setup lab test lint unit notebooks lesson exercises browser site bench checkpoints clean-corpus constraints upgrade-check

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name attnlab --display-name "Attention Lab" >/dev/null
	@touch $(STAMP)

setup: $(STAMP)

# The lessons are trusted first (they are ours): JupyterLab shows an untrusted notebook's saved
# widgets as raw text until its cells run again.
lab: setup
	$(VENV)/bin/jupyter trust notebooks/[0-9][0-9]_*.ipynb >/dev/null
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --no-browser $(ROOT_FLAG)

# Two workers (the course machine has 2 cores; every kernel and test uses one thread). nbval keeps
# each notebook on one worker (--dist loadscope), so its cells run in order in one kernel.
XDIST := -n 2
test: setup
	$(VENV)/bin/ruff check lib tests notebooks benchmarks scripts
	$(VENV)/bin/pytest $(XDIST) tests
	$(VENV)/bin/pytest tests/browser --durations=6
	$(VENV)/bin/pytest $(XDIST) --dist loadscope $(NBVAL) notebooks

lint: setup
	$(VENV)/bin/ruff check lib tests notebooks benchmarks scripts

unit: setup
	$(VENV)/bin/pytest $(XDIST) tests

notebooks: setup
	$(VENV)/bin/pytest $(XDIST) --dist loadscope $(NBVAL) notebooks

# The lessons in JupyterLab, in headless Chromium (tests/browser/README.md). One process: under
# xdist (`make unit`) they skip with a line pointing here.
browser: setup
	$(VENV)/bin/pytest tests/browser --durations=6

# The course website in site/ (open site/index.html), built offline from the committed notebooks:
# Sphinx + MyST-NB, with MathJax, RequireJS and the widget manager from the npm registry (needs npm
# once; the tarballs are cached and sha512-checked in build/npm/). tests/browser/test_site.py checks it.
site: setup
	$(PY) scripts/build_site.py --out site

# The exercise version of every lesson: exercises/NN_*.ipynb, each solution replaced by a stub
# (solutions stay in notebooks/; tests/test_exercises.py proves every check fails on its stub).
exercises: setup
	$(PY) -m attnlab.course.exercises --notebooks notebooks --out exercises

# One lesson's checks, e.g. `make lesson N=02`.
lesson: setup
	$(VENV)/bin/pytest $(NBVAL) notebooks/$(N)_*.ipynb

bench: setup
	$(PY) benchmarks/bench_mha.py
	$(PY) benchmarks/bench_scale.py

# Retrain every shipped model (both pairs) and rewrite data/checkpoints + data/results, then the
# fixture of tests/test_shipped_models.py and the README table. Hours on the cpu profile. The lesson
# models get the lessons' budget; the Luong variants get compare_luong.py's longer one.
SHIPPED_MODELS := rnn_noattn bahdanau transformer
checkpoints: setup
	$(PY) -m attnlab.training.experiments $(SHIPPED_MODELS) --pair fr --ship --curve-every 100
	$(PY) -m attnlab.training.experiments $(SHIPPED_MODELS) --pair ko --ship --curve-every 100
	$(PY) scripts/compare_luong.py --pair fr ko --jobs 2
	$(PY) scripts/lesson07_experiments.py
	$(PY) scripts/lesson08_experiments.py
	$(PY) scripts/make_shipped_fixture.py
	$(PY) -m attnlab.training.report --readme

clean-corpus:
	rm -rf data/corpus

# Rewrite constraints.txt from what the course venv has installed (after a tested upgrade).
constraints: setup
	{ sed -n '/^#/p' $(CONSTRAINTS); $(VENV)/bin/pip freeze --exclude-editable | grep -v -i '^attnlab[= ]' | grep -v '^#'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

# What would break next year: the newest releases (no constraints.txt) in a scratch venv, then the
# unit tests. Prints each version that differs from the pins, then pytest's summary of failures;
# exits non-zero when a test fails. Downloads a few GB; the course venv is left alone.
upgrade-check:
	rm -rf $(UPGRADE_VENV)
	$(PYTHON) -m venv $(UPGRADE_VENV)
	$(UPGRADE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(UPGRADE_VENV)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'
	$(UPGRADE_VENV)/bin/pip freeze --exclude-editable > $(UPGRADE_VENV)/freeze.txt
	@echo "Versions that differ from $(CONSTRAINTS) (pinned -> newest):"
	@$(UPGRADE_VENV)/bin/python -c 'import sys; r = lambda p: dict(l.strip().split("==", 1) for l in open(p) if "==" in l and l[0] != "#"); a, b = r(sys.argv[1]), r(sys.argv[2]); [print("  %s: %s -> %s" % (k, a.get(k, "-"), b.get(k, "-"))) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]' $(CONSTRAINTS) $(UPGRADE_VENV)/freeze.txt
	@echo "Unit tests with the newest versions:"
	$(UPGRADE_VENV)/bin/python -m pytest tests -q -p no:cacheprovider -rfE --tb=line
