# Two entry points work on a fresh machine with Python 3.11 and nothing else installed by hand:
#   make plan   - set up .venv and render every stack offline (build/plan/<stack>.json)
#   make test   - set up .venv with the test tools and run the whole suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: plan test lint fmt clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The base install is enough for the offline plan.
$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e .
	touch $@

# Tests need the dev tools and the trainer's stack (CPU torch from the local wheel, see README).
$(VENV)/.dev: pyproject.toml $(VENV)/.base
	$(PIP) install -q -e '.[dev,trainer]'
	touch $@

plan: $(VENV)/.base
	$(BIN)/aiplat plan --all

test: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(VENV)/.dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf build .pytest_cache .ruff_cache
