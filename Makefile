PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test venv clean

$(BIN)/flopwise: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/flopwise

venv: $(BIN)/flopwise

## The main job on built-in defaults: plan Llama-3.1-8B chat serving under a chat SLA on common GPUs.
run: venv
	$(BIN)/flopwise plan

## The whole test suite.
test: venv
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV)
