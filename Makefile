# Two entry points work on a fresh machine with Python 3.11 and nothing else installed by hand:
#   make plan   - set up .venv and render every stack offline (build/plan/<stack>.json)
#   make test   - set up .venv with the test tools and run the whole suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# mkdocs-material prints a banner about MkDocs 2 on every build; it is not a warning of ours.
export NO_MKDOCS_2_WARNING := 1
# Another apt-get (unattended-upgrades, a second make) may hold the dpkg lock: wait up to 10 minutes for it
# instead of failing at once (DPkg::Lock::Timeout, apt 1.9.11 and later: apt-get(8)).
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600

.PHONY: plan review docs docs-serve test test-fast lint lint-docker fmt clean train-local bench-trainer promtool policy-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The offline plan: the base install plus moto's AWS snapshot (`pulumi up` needs only the base install).
$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e '.[plan]'
	touch $@

# The policy pack's SDK for `aiplat review` and the tests. pulumi-policy 1.21.0 pins protobuf~=5.29.5, but
# its code runs on the protobuf 6 that pulumi 3.272 brings (the tests drive it through the pack, in process
# and over gRPC), so it goes in without its dependencies; the version is the one policies/requirements.txt
# pins for the pack's own venv (docs/policy-pack.md).
$(VENV)/.policy: policies/requirements.txt $(VENV)/.base
	$(PIP) install -q --no-deps $$(grep '^pulumi-policy==' policies/requirements.txt)
	touch $@

# The docs site's tools (the `docs` extra) and the pinned mermaid its diagrams use (site-tools/: npm fetches the
# tarball, its sha512 checked against package-lock.json; npm comes from Debian when missing).
$(VENV)/.docs: pyproject.toml site-tools/package-lock.json | $(BIN)/python
	$(PIP) install -q -e '.[docs]'
	@command -v npm >/dev/null || { \
		echo "npm missing (it fetches the docs site's mermaid): apt-get install -y npm"; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq --no-install-recommends npm; }
	$(BIN)/python site-tools/fetch_mermaid.py
	touch $@

# The site in build/site: open build/site/index.html in a browser (it browses from file://, diagrams
# included; search needs `make docs-serve`), or serve it with `make docs-serve` (http://127.0.0.1:8000).
docs: $(VENV)/.docs
	$(BIN)/mkdocs build --strict --site-dir build/site

docs-serve: $(VENV)/.docs
	$(BIN)/mkdocs serve

# Tests need the dev tools, the trainer's and the release fetch tool's stacks (CPU torch from the local wheel,
# see docs/trainer.md), the docs site's tools and the policy pack's SDK.
$(VENV)/.dev: pyproject.toml images/trainer/requirements.txt $(VENV)/.base $(VENV)/.policy $(VENV)/.docs
	$(PIP) install -q -e '.[dev,trainer,inference]'
	touch $@

STACKS := $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))

# Plan every stack, then review the saved plans with the policy pack (exit 5 on a mandatory violation).
# Two lines per stack and one row per policy; `make plan PLAN_FLAGS=--tree REVIEW_FLAGS=--verbose` for all.
PLAN_FLAGS ?=
REVIEW_FLAGS ?=
plan: $(VENV)/.base $(VENV)/.policy
	$(BIN)/aiplat plan --all $(PLAN_FLAGS)
	$(BIN)/aiplat review $(REVIEW_FLAGS) $(foreach s,$(STACKS),--plan build/plan/$(s).json)

review: $(VENV)/.base $(VENV)/.policy
	$(BIN)/aiplat review --all

# The pack's own virtualenv, as `pulumi preview --policy-pack policies` uses it.
policy-venv: policies/venv/bin/python
policies/venv/bin/python: policies/requirements.txt
	$(PYTHON) -m venv policies/venv
	policies/venv/bin/python -m pip install -q -r policies/requirements.txt
	touch $@

# The docs site: a broken link, a missing anchor or a page left out of the nav fails the build; the
# generated pages' staleness is a test (tests/infra/cli/test_docs.py). The suite runs on every core
# (pytest-xdist), one test file per worker, so a file's module fixtures (its plans) are built once.
test: $(VENV)/.dev lint-docker promtool policy-venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mkdocs build --strict --site-dir build/site
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# The edit-test loop: everything but the tests marked slow (processes, servers, CLI runs over every stack);
# `make test` stays the whole suite.
test-fast: $(VENV)/.dev promtool
	$(BIN)/python -m pytest -q -m "not slow"

# promtool checks and unit-tests the alert rules (tests/monitoring): the Debian package `prometheus` ships it.
# Installed only when missing; the tests fail (not skip) without it.
promtool:
	@command -v promtool >/dev/null || { \
		echo "promtool missing: apt-get install -y prometheus"; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq --no-install-recommends prometheus; }
	@promtool --version | head -1

lint-docker: $(VENV)/.dev
	$(BIN)/hadolint images/*/Dockerfile examples/*/Dockerfile

# Two CPU ranks (gloo) under the launcher against a local S3 (a moto server the tool starts and stops);
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
