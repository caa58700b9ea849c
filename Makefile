# Attention Lab: two commands set everything up on a fresh machine.
#   make lab   -> venv + install + kernel, then JupyterLab on notebooks/
#   make test  -> venv + install + kernel, then ruff, pytest, nbval
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.attnlab-installed
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: setup lab test lint unit notebooks lesson bench checkpoints clean-corpus

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name attnlab --display-name "Attention Lab" >/dev/null
	@touch $(STAMP)

setup: $(STAMP)

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --no-browser $(ROOT_FLAG)

test: setup
	$(VENV)/bin/ruff check lib tests notebooks benchmarks scripts
	$(VENV)/bin/pytest tests
	$(VENV)/bin/pytest $(NBVAL) notebooks

lint: setup
	$(VENV)/bin/ruff check lib tests notebooks benchmarks scripts

unit: setup
	$(VENV)/bin/pytest tests

notebooks: setup
	$(VENV)/bin/pytest $(NBVAL) notebooks

# One lesson's checks, e.g. `make lesson N=02`.
lesson: setup
	$(VENV)/bin/pytest $(NBVAL) notebooks/$(N)_*.ipynb

bench: setup
	$(PY) benchmarks/bench_mha.py

# Retrain every shipped model and rewrite data/checkpoints + data/results.
checkpoints: setup
	$(PY) -m attnlab.experiments all

clean-corpus:
	rm -rf data/corpus
