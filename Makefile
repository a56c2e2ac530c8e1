# The DSS notification relay. `make help` lists the targets.
SHELL := /bin/bash
CARGO ?= cargo
TOOLS := .venv-tools
# cargo-lambda and zig come from PyPI into $(TOOLS); cargo finds cargo-lambda on PATH.
export PATH := $(CURDIR)/$(TOOLS)/bin:$(PATH)

.DEFAULT_GOAL := help
.PHONY: help build run test test-unit test-integration smoke lint fmt emulators-up emulators-down \
	lambda lambda-tools image tf-check bench clean-run fuzz fuzz-tools faults bench-load

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

build: ## Build every crate (debug)
	$(CARGO) build --workspace

run: ## Build, then start relay-gcf on 127.0.0.1:8080 with the file sink and a development key
	$(CARGO) build -p relay-gcf -p relay-cli
	infra/local/run.sh

# One feature set for every test build (--all-features), so nothing compiles twice.
test: ## Everything the tests need (emulators included), then all tests; emulators stopped after
	infra/local/tf-check.sh
	$(CARGO) build --workspace --all-targets --all-features
	infra/local/emulators.sh start
	status=0; \
	  { source infra/local/env.sh && $(CARGO) test --workspace --all-features && infra/local/smoke.sh; } \
	    || status=$$?; \
	  infra/local/emulators.sh stop; \
	  exit $$status

test-unit: ## Unit and component tests (no emulator needed)
	$(CARGO) test --workspace --all-features --exclude relay-tests

test-integration: ## Integration tests; needs `make emulators-up`
	source infra/local/env.sh && $(CARGO) test -p relay-tests --features integration-tests

smoke: ## The Quick start end to end: relay-gcf plus `relay send`, payloads compared byte for byte
	$(CARGO) build -p relay-gcf -p relay-cli
	infra/local/smoke.sh

emulators-up: ## Start moto (SQS, SNS, S3, DynamoDB), fake-gcs-server and the Pub/Sub and Firestore emulators on 127.0.0.1
	infra/local/emulators.sh start

emulators-down: ## Stop the emulators started by emulators-up (by process id)
	infra/local/emulators.sh stop

lambda-tools: $(TOOLS)/bin/cargo-lambda ## Install cargo-lambda and zig into .venv-tools

$(TOOLS)/bin/cargo-lambda:
	python3 -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check cargo-lambda ziglang

# Cargo features added to relay-lambda's defaults (sqs, sns, secrets, s3), e.g. LAMBDA_FEATURES=pubsub.
LAMBDA_FEATURES ?=
LAMBDA_FEATURE_ARGS = $(if $(LAMBDA_FEATURES),--features $(LAMBDA_FEATURES))

# The zip's instruction set goes to target/lambda/relay-lambda/architecture ("arm64" or "x86_64"),
# which the aws-relay module reads: the function's architecture always matches the build. The file
# is removed first, so a failed build leaves no stale one behind.
lambda: lambda-tools ## Build target/lambda/relay-lambda/bootstrap.zip (arm64; x86_64 without the arm64 target) and record its architecture next to it
	@rm -f target/lambda/relay-lambda/architecture
	@set -e; \
	if rustup target list --installed 2>/dev/null | grep -q '^aarch64-unknown-linux-gnu$$'; then \
	  arch=arm64; \
	  set -x; $(CARGO) lambda build --profile lambda --arm64 -p relay-lambda $(LAMBDA_FEATURE_ARGS) --output-format zip; set +x; \
	else \
	  arch=x86_64; \
	  echo "lambda: no aarch64-unknown-linux-gnu target installed; building x86_64"; \
	  set -x; $(CARGO) lambda build --profile lambda --x86-64 --compiler cargo -p relay-lambda $(LAMBDA_FEATURE_ARGS) --output-format zip; set +x; \
	fi; \
	echo "$$arch" > target/lambda/relay-lambda/architecture; \
	echo "lambda: $$arch (written to target/lambda/relay-lambda/architecture, which the aws-relay module reads)"
	@ls -l target/lambda/relay-lambda/bootstrap.zip

tf-check: ## terraform fmt -check and checkov over terraform/ (offline), then the hcl-rs tests
	infra/local/tf-check.sh
	$(CARGO) test -p relay-tests --test terraform

IMAGE ?= relay-gcf:dev
# Cloud Run runs linux/amd64 images only: the platform is fixed, so an arm64 builder (Apple
# silicon, Graviton) still produces an image Cloud Run can start (built under emulation there).
image: ## Build the relay-gcf image for linux/amd64 (infra/docker/Dockerfile); needs a Docker engine with BuildKit
	@command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 || { echo "image: no Docker engine here; build where one runs, or with Cloud Build" >&2; exit 1; }
	DOCKER_BUILDKIT=1 docker build --platform linux/amd64 -f infra/docker/Dockerfile -t $(IMAGE) .

bench: ## Routing benchmark (criterion): 20 routes against the parse and catch-all baselines
	$(CARGO) bench -p relay-core --bench route

bench-load: ## relay-gcf's cost per notification against a bare floor, on loopback (release build)
	$(CARGO) build --release -p relay-gcf -p relay-bench --features relay-gcf/dynamodb
	taskset -c 1 target/release/bench-load

faults: ## The fault matrix with 10,000 notifications per fault; prints the table (docs/faults.md)
	$(CARGO) build --workspace --all-features
	FAULT_NOTIFICATIONS=10000 $(CARGO) test --workspace --all-features --test faults -- --nocapture

# Fuzzing needs the nightly toolchain and cargo-fuzz (installed from crates.io into .tools-fuzz).
# Each target starts from its named seeds (fuzz/seeds/<target>, in git) and grows its corpus in
# fuzz/corpus/<target>, the first folder given, so new inputs land there. The grown corpus stays
# outside git (.gitignore); keep an input worth keeping as a seed or, if it found a fault, in
# fuzz/regressions/<target> (fuzz/README.md).
FUZZ_TOOLS := .tools-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := signature_header verification intake notification pattern config_file

fuzz-tools: $(FUZZ_TOOLS)/bin/cargo-fuzz ## Install cargo-fuzz into .tools-fuzz (needs the nightly toolchain)

$(FUZZ_TOOLS)/bin/cargo-fuzz:
	$(CARGO) +nightly install --locked cargo-fuzz --root $(FUZZ_TOOLS)

fuzz: fuzz-tools ## Run every fuzz target for FUZZ_SECONDS (default 60) each from its seeds, then minimize its local corpus
	cd fuzz && for target in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$target || exit 1; \
	  PATH="$(CURDIR)/$(FUZZ_TOOLS)/bin:$$PATH" $(CARGO) +nightly fuzz run $$target corpus/$$target seeds/$$target -- \
	    -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 || exit 1; \
	  PATH="$(CURDIR)/$(FUZZ_TOOLS)/bin:$$PATH" $(CARGO) +nightly fuzz cmin $$target corpus/$$target || exit 1; \
	done

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

clean-run: ## Forget the development key, the local file sink and the local ledger
	rm -rf target/run target/smoke
