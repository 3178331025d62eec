# Switchboard: `make dev` runs the API locally, `make test` runs every test. Both install what they need first.
SHELL := /bin/bash
PYTHON ?= $(shell PYENV_VERSION=3.13.0 pyenv which python3.13 2>/dev/null || command -v python3.13)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SAM_VENV := .venv-sam
PORT ?= 3000
PYTEST_WORKERS ?= 2

.PHONY: install chromium dev test test-unit test-integration test-e2e test-faults test-powertools-range lint lint-openapi format typecheck openapi build validate bootstrap bench fuzz load clean

$(STAMP): requirements-dev.txt layers/core/requirements.txt
	@test -n "$(PYTHON)" || { echo "python3.13 not found (pyenv install 3.13.0, or set PYTHON=)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@touch $(STAMP)

## Everything the tests need: the venv, and Chromium for the portal's browser test (`make dev` needs only the venv).
install: $(STAMP) chromium

## Headless Chromium (Debian's package) for the webhook portal's browser test; the test fails without it.
chromium:
	@command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --disable-pip-version-check aws-sam-cli==1.170.0
	@touch $@

## Run the API on 127.0.0.1:$(PORT) with moto as AWS; prints the URL and a working API key.
dev: $(STAMP)
	PORT=$(PORT) $(BIN)/python -m local

## Every test: unit, integration (moto) and e2e (HTTP against the local stack, started by a fixture).
test: install
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

## The Powertools range of layers/core/requirements.txt, tested at both ends: the lower bound installed over the dev
## venv in a throwaway venv under /tmp (it shadows the pinned Powertools; everything else is the dev venv's), then
## the same tests with the pinned upper end.
POWERTOOLS_MIN := $(shell sed -n 's/^aws-lambda-powertools>=\([0-9.]*\),.*/\1/p' layers/core/requirements.txt)
POWERTOOLS_MIN_VENV := /tmp/switchboard-powertools-$(POWERTOOLS_MIN)
POWERTOOLS_RANGE_TESTS := tests/unit/test_no_private_names.py tests/integration/test_contacts.py \
	tests/integration/test_request_bodies.py tests/integration/test_access_matrix.py \
	tests/integration/test_static_paths.py tests/integration/test_resolver.py tests/unit/test_metrics_emf.py \
	tests/faults/test_queue_redelivery.py tests/integration/test_cdp_segments.py tests/unit/test_bench_webhook_send.py
test-powertools-range: install
	@test -n "$(POWERTOOLS_MIN)" || { echo "no aws-lambda-powertools>=X,<Y range in layers/core/requirements.txt"; exit 1; }
	test -x $(POWERTOOLS_MIN_VENV)/bin/python || $(PYTHON) -m venv $(POWERTOOLS_MIN_VENV)
	$(POWERTOOLS_MIN_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps \
		aws-lambda-powertools==$(POWERTOOLS_MIN)
	$(BIN)/python -c "import site; print(site.getsitepackages()[0])" \
		> $$($(POWERTOOLS_MIN_VENV)/bin/python -c "import site; print(site.getsitepackages()[0])")/switchboard-dev.pth
	$(POWERTOOLS_MIN_VENV)/bin/python -c "from aws_lambda_powertools.shared.version import VERSION; \
		assert VERSION == '$(POWERTOOLS_MIN)', VERSION; print('lower bound:', VERSION)"
	$(POWERTOOLS_MIN_VENV)/bin/python -m pytest -n 0 -q $(POWERTOOLS_RANGE_TESTS)
	$(BIN)/python -c "from aws_lambda_powertools.shared.version import VERSION; print('upper end:', VERSION)"
	$(BIN)/python -m pytest -n 0 -q $(POWERTOOLS_RANGE_TESTS)

test-unit: install
	$(BIN)/python -m pytest tests/unit

test-integration: install
	$(BIN)/python -m pytest tests/integration

test-e2e: install
	$(BIN)/python -m pytest tests/e2e

## Fault injection (throttling, races, redelivery, bus outages): each test prints accepted/arrived/lost/duplicated.
test-faults: install
	$(BIN)/python -m pytest tests/faults -s -q

lint: install $(SAM_VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/cfn-lint template.yaml
	AWS_DEFAULT_REGION=us-east-1 $(SAM_VENV)/bin/sam validate --lint --region us-east-1
	$(MAKE) lint-openapi

## The npm tools pinned in package-lock.json (redocly, spectral, openapi-typescript, typescript), into node_modules.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## The OpenAPI document as integrators' linters read it: redocly (`recommended`) and spectral (`spectral:oas`), both
## with 0 warnings (redocly fails only on errors by itself, so its summary's warning count is checked here).
OPENAPI_DOC := layers/core/switchboard/openapi.json
lint-openapi: node_modules/.installed
	@out=$$(npx --no-install redocly lint --config redocly.yaml --format=stylish $(OPENAPI_DOC) 2>&1); status=$$?; \
		echo "$$out" | grep -E "(warning|error) +[a-z]|You have|valid"; \
		if [ $$status -ne 0 ] || echo "$$out" | grep -qE "You have [0-9]+ (warning|error)"; then exit 1; fi
	npx --no-install spectral lint --ruleset .spectral.yaml --fail-severity=warn --display-only-failures $(OPENAPI_DOC)

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: install
	$(BIN)/mypy

## Regenerate the merged OpenAPI document served by /openapi.json (a test fails when it drifts).
openapi: install
	PYTHONPATH=layers/core:. $(BIN)/python -m switchboard.openapi_doc functions

## sam build without a container (needs python3.13 on PATH, which pyenv provides) into .aws-sam/build, which
## `sam deploy` packages; then every module of the layer and the functions is compiled to bytecode. Lambda's code
## directories are read-only, so modules shipped without .pyc are compiled from source at every cold start (pydantic,
## Powertools, FastAPI and our package: several times the whole init; docs/performance.md). `unchecked-hash`: the
## .pyc stays valid whatever mtimes the zip gives the sources. The last step fails the build if any is missing.
BUILD_DIR ?= .aws-sam/build
build: $(SAM_VENV)/.installed
	PATH=$(dir $(PYTHON)):$$PATH $(SAM_VENV)/bin/sam build --build-dir $(BUILD_DIR)
	$(PYTHON) -m compileall -q -j 0 --invalidation-mode unchecked-hash $(BUILD_DIR)
	$(PYTHON) local/bytecode_check.py $(BUILD_DIR)

## The first credential of a deployed stage, run once after `sam deploy` (docs/operations.md, "Deploying a stage"):
## an owner, an organization, an owner API key and a sign-up key, shown once. The stack's outputs are read with the
## AWS credentials of the shell; a second run reports the first owner, NEW_KEY=1 mints another owner key.
STAGE ?= dev
bootstrap: $(STAMP)
	@test -n "$(OWNER_EMAIL)" || { echo "usage: make bootstrap STAGE=dev OWNER_EMAIL=you@your.org [OWNER_NAME=…] [ORG_NAME=…] [NEW_KEY=1]"; exit 1; }
	PYTHONPATH=layers/core $(BIN)/python -m switchboard.identity.bootstrap --stage "$(STAGE)" \
		--owner-email "$(OWNER_EMAIL)" $(if $(OWNER_NAME),--owner-name "$(OWNER_NAME)") \
		$(if $(ORG_NAME),--org-name "$(ORG_NAME)") $(if $(NEW_KEY),--new-key)

bench: install
	$(BIN)/python -m bench

## Contract fuzzing deeper than the bounded run inside `make test`: more examples per operation, schemathesis'
## coverage phase, a random seed (printed; FUZZ_SEED=<it> replays it). Strict like `make test` (every check fails the
## run, save the commented exceptions in tests/contract/conftest.py); FUZZ_STRICT=0 only lists two checks' failures.
fuzz: install
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-25} FUZZ_COVERAGE=1 FUZZ_SEED=$${FUZZ_SEED:-$$RANDOM$$RANDOM} \
		$(BIN)/python -m pytest tests/contract -p no:xdist -s

## A bounded load run (a local stack of its own, the load from this second process, loopback only): contact writes,
## resolves, sandbox sends and lists vs the floor routes; throughput, p50/p99, errors (must be 0) and the ratios.
LOAD_REQUESTS ?= 1000
LOAD_CONCURRENCY ?= 4
LOAD_TIME_CAP ?= 120
load: install
	$(BIN)/python -m tests.load --requests $(LOAD_REQUESTS) --concurrency $(LOAD_CONCURRENCY) --time-cap $(LOAD_TIME_CAP)

clean:
	rm -rf $(VENV) $(SAM_VENV) .aws-sam .mypy_cache .ruff_cache
