# Attention Lab: two commands set everything up on a fresh machine.
#   make lab   -> venv + install + kernel, then JupyterLab on notebooks/
#   make test  -> venv + install + kernel, then every test stage (lint, unit, numeric-default,
#                 numeric-avx2, browser, notebooks), all of them even when one fails, and a summary
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

.PHONY: setup lab test lint unit numeric notebooks lesson exercises browser site bench checkpoints clean-corpus \
	constraints upgrade-check stage-times python-matrix

# The oldest Python the course supports, from pyproject.toml's requires-python (">=3.10").
PY_MIN := $(shell sed -n 's/^requires-python *= *">= *\([0-9.]*\)".*/\1/p' pyproject.toml)
# Stops before pip runs when the Python that would make (or has made) the venv is too old. The
# one-liner is valid Python 2 too, so that even `python` 2.7 gets the sentence, not a traceback.
CHECK_PYTHON = py=$(PY); test -x $$py || py=$(PYTHON); \
	$$py -c 'import sys; m = tuple(int(x) for x in "$(PY_MIN)".split(".")); sys.exit(0 if m and sys.version_info[:len(m)] >= m else "Attention Lab needs Python >= $(PY_MIN) (requires-python in pyproject.toml), but %s is Python %d.%d.%d: run e.g. make setup PYTHON=python3.11 (an existing $(VENV) must be removed first)" % ((sys.executable,) + tuple(sys.version_info[:3])))'

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@test -n "$(PY_MIN)" || { echo "could not read requires-python from pyproject.toml" >&2; exit 1; }
	@$(CHECK_PYTHON)
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
# each notebook on one worker (--dist loadscope), so its cells run in order in one kernel; the
# lessons go out longest first (notebooks/conftest.py orders them; --no-loadscope-reorder keeps
# xdist from sorting them by their number of cells instead).
XDIST := -n 2
# The test stages. `make test` runs every one of them through scripts/run_stages.py, also after a
# failure, then prints one line per stage (passed/failed, seconds) and the total; the figures are kept
# in $(STAGE_TIMES) (`make stage-times` prints them again). The numeric stages rerun the tests marked
# `numeric` (only the files that mark some) with PyTorch's and MKL's kernels for older CPUs, whose
# float32 last digits differ. Stages that keep one core busy run two at a time (--together): the two
# numeric stages (one process each), and the browser stage (one pytest process driving one Chromium)
# beside the notebooks stage.
STAGE_TIMES ?= build/stage_times.json
NUMERIC_FILES := $(shell grep -rl --include='*.py' 'mark\.numeric' tests | sort)
LINT_CMD := $(VENV)/bin/ruff check lib tests notebooks benchmarks scripts
UNIT_CMD := $(VENV)/bin/pytest $(XDIST) --durations=15 tests
NUMERIC_DEFAULT_CMD := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 $(VENV)/bin/pytest -m numeric $(NUMERIC_FILES)
NUMERIC_AVX2_CMD := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 $(VENV)/bin/pytest -m numeric $(NUMERIC_FILES)
BROWSER_CMD := $(VENV)/bin/pytest tests/browser --durations=6
NOTEBOOKS_CMD := $(VENV)/bin/pytest $(XDIST) --dist loadscope --no-loadscope-reorder --durations=20 $(NBVAL) notebooks
RUN_STAGES := $(PY) scripts/run_stages.py --json $(STAGE_TIMES)
# The course's aim for the whole of `make test` after setup on 2 cores: 12 minutes. The summary's last
# line says whether this run met it; a speed target is reported, never a failure.
TEST_AIM_SECONDS := 720

test: setup
	$(RUN_STAGES) --aim $(TEST_AIM_SECONDS) --stage lint '$(LINT_CMD)' --stage unit '$(UNIT_CMD)' \
		--stage numeric-default '$(NUMERIC_DEFAULT_CMD)' --stage numeric-avx2 '$(NUMERIC_AVX2_CMD)' \
		--stage browser '$(BROWSER_CMD)' --stage notebooks '$(NOTEBOOKS_CMD)' \
		--together numeric-default,numeric-avx2 --together browser,notebooks

# The time of each stage of the last `make test`.
stage-times:
	@$(PYTHON) scripts/run_stages.py --report $(STAGE_TIMES)

lint: setup
	$(LINT_CMD)

unit: setup
	$(UNIT_CMD)

numeric: setup
	$(PY) scripts/run_stages.py --json build/numeric_times.json --stage numeric-default '$(NUMERIC_DEFAULT_CMD)' \
		--stage numeric-avx2 '$(NUMERIC_AVX2_CMD)' --together numeric-default,numeric-avx2

notebooks: setup
	$(NOTEBOOKS_CMD)

# The lessons in JupyterLab, in headless Chromium (tests/browser/README.md). One process: under
# xdist (`make unit`) they skip with a line pointing here.
browser: setup
	$(BROWSER_CMD)

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
	$(PY) scripts/lesson12_experiments.py
	$(PY) scripts/make_shipped_fixture.py
	$(PY) -m attnlab.training.report --readme

clean-corpus:
	rm -rf data/corpus

# Rewrite constraints.txt from what the course venv has installed (after a tested upgrade; the venv
# must be the reference Python, >= 3.11). Its pins get `; python_version >= "3.11"` where a line for
# Python 3.10 (`; python_version < "3.11"`) exists; those lines are kept: refresh them by hand, with
# `pip install --dry-run --report` in a Python 3.10 venv, then `make python-matrix`.
constraints: setup
	$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "make constraints: the venv must be Python >= 3.11")'
	$(VENV)/bin/pip freeze --exclude-editable | grep -v -i '^attnlab[= ]' | grep -v '^#' > $(CONSTRAINTS).freeze
	$(PY) -c 'import re, sys; \
	key = lambda line: re.sub(r"[-_.]+", "-", line.split("==")[0].split(";")[0].strip()).lower(); \
	old = open(sys.argv[1]).read().splitlines(); \
	low = {key(x): x for x in old if x.endswith("; python_version < \"3.11\"")}; \
	frozen = [x.strip() for x in open(sys.argv[2]) if x.strip()]; \
	out = [x for x in old if x.startswith("#")]; \
	[out.extend([x + "; python_version >= \"3.11\"", low[key(x)]] if key(x) in low else [x]) for x in frozen]; \
	out += [low[k] for k in sorted(set(low) - {key(x) for x in frozen})]; \
	open(sys.argv[1] + ".new", "w").write("\n".join(out) + "\n")' $(CONSTRAINTS) $(CONSTRAINTS).freeze
	rm $(CONSTRAINTS).freeze
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

# Every Python the README promises: the oldest and the newest supported one each get a venv under
# $(MATRIX_DIR) (kept between runs; `make setup` reinstalls when pyproject.toml or constraints.txt
# change; rm -rf it for a fresh one), installed by `make setup` through constraints.txt (its
# python_version markers pick the pins for that Python), then $(MATRIX_TESTS). One line per Python
# at the end, every failing test listed above it; exits non-zero when one fails. Defaults: pyenv's
# newest 3.10.x and 3.13.x when pyenv has them, else python3.10 and python3.13 from PATH.
PYENV_ROOT ?= $(HOME)/.pyenv
pyenv_python = $(or $(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/$(1).*/bin/python))),python$(1))
PY_OLDEST ?= $(call pyenv_python,3.10)
PY_NEWEST ?= $(call pyenv_python,3.13)
MATRIX_DIR ?= /tmp/attnlab-matrix
# A core subset that touches every pinned library the course leans on (torch, fastai, numpy,
# matplotlib, ipywidgets, safetensors, sentencepiece, nbformat) in a few minutes; the whole unit
# stage takes far longer on 2 cores. `make python-matrix MATRIX_TESTS=tests` runs all of it.
MATRIX_TESTS ?= $(addprefix tests/test_,$(addsuffix .py,masks attention scores positions linear_attention \
	transformer rnn train checkpoint corpus korean tsv vocab loaders plots widgets_scores notebooks_meta \
	realcorpus run_stages))
matrix_stage = --stage python-$(1) 'set -e; v=$(MATRIX_DIR)/py$(1); $(2) --version; \
	$(MAKE) --no-print-directory setup PYTHON=$(2) VENV=$$v; \
	OMP_NUM_THREADS=1 $$v/bin/pytest $(XDIST) -q -rfE -p no:cacheprovider $(MATRIX_TESTS)'
# MATRIX_ONLY=python-oldest (or python-newest) runs one of the two.
python-matrix:
	@python3 scripts/run_stages.py --json $(MATRIX_DIR)/times$(if $(MATRIX_ONLY),-$(MATRIX_ONLY)).json $(if $(MATRIX_ONLY),--only $(MATRIX_ONLY)) \
		$(call matrix_stage,oldest,$(PY_OLDEST)) $(call matrix_stage,newest,$(PY_NEWEST))
