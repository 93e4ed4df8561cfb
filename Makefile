# Two entry points work on a fresh machine with Python 3.11 and nothing else installed by hand:
#   make plan   - set up .venv and render every stack offline (build/plan/<stack>.json)
#   make test   - set up .venv with the test tools and run the whole suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: plan test lint lint-docker fmt clean train-local bench-trainer

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The base install is enough for the offline plan.
$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e .
	touch $@

# Tests need the dev tools and the trainer's stack (CPU torch from the local wheel, see README).
$(VENV)/.dev: pyproject.toml images/trainer/requirements.txt requirements-dev.txt $(VENV)/.base
	$(PIP) install -q -e '.[dev,trainer]'
	touch $@

plan: $(VENV)/.base
	$(BIN)/aiplat plan --all

test: $(VENV)/.dev lint-docker
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint-docker: $(VENV)/.dev
	$(BIN)/hadolint images/trainer/Dockerfile

# Two CPU ranks (gloo) under torchrun against a local S3 (a moto server the tool starts and stops);
# checkpoints to s3://local-ckpt/debug, Prometheus metrics on :9400 (rank 0) and :9401 (rank 1).
train-local: $(VENV)/.dev
	$(BIN)/python -m trainer.tools.train_local --steps 40 --metrics-port 9400 --workdir runs/local

# Benchmarks print ratios measured in one run; they are not tests. OMP_NUM_THREADS=1 is what torchrun
# sets per rank.
bench-trainer: $(VENV)/.dev
	OMP_NUM_THREADS=1 $(BIN)/python bench/step_overhead.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/checkpoint_blocking.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/checkpoint_blocking.py --s3 --layers 4 --d-model 256
	OMP_NUM_THREADS=1 $(BIN)/python bench/data_loader.py

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(VENV)/.dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf build .pytest_cache .ruff_cache
