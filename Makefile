PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint venv test-venv clean

# The package and its runtime dependencies only (typer, rich, pyyaml, numpy, httpx, plotly): what `flopwise plan`
# needs. No torch, no test tools.
$(VENV)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# Test tools and the profiling extra (torch's CPU wheel) on top, for `make test`.
$(VENV)/.test: $(VENV)/.runtime
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.runtime
test-venv: $(VENV)/.test

## The main job on built-in defaults: plan Llama-3.1-8B chat serving under the chat SLA on common GPUs.
run: venv
	$(BIN)/flopwise plan

## The lint and type gate: ruff over the tree, mypy (strict where pyproject.toml says) over the package.
lint: test-venv
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

## The whole test suite, after the lint and type gate.
test: lint
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV)
