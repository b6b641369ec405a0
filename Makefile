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

## The main job on built-in defaults.
run: venv
	$(BIN)/flopwise estimate

## The whole test suite.
test: venv
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV)
