# The DSS notification relay. `make help` lists the targets.
SHELL := /bin/bash
CARGO ?= cargo
TOOLS := .venv-tools
# cargo-lambda and zig come from PyPI into $(TOOLS); cargo finds cargo-lambda on PATH.
export PATH := $(CURDIR)/$(TOOLS)/bin:$(PATH)

.DEFAULT_GOAL := help
.PHONY: help build run test test-unit test-integration smoke lint fmt emulators-up emulators-down \
	lambda lambda-tools lambda-check image tf-check bench clean-run fuzz fuzz-tools faults bench-load

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
	infra/local/lambda-glibc-test.sh
	$(CARGO) build --workspace --all-targets --all-features
	infra/local/emulators.sh start
	status=0; \
	  { source infra/local/env.sh && infra/local/moto-apply.sh \
	    && $(CARGO) test --workspace --all-features && infra/local/smoke.sh \
	    && infra/local/recipes.sh; } \
	    || status=$$?; \
	  infra/local/emulators.sh stop; \
	  exit $$status

test-unit: ## Unit and component tests (no emulator needed)
	$(CARGO) test --workspace --all-features --exclude relay-tests

test-integration: ## Integration tests (the aws-sqs example applied to moto first); needs `make emulators-up`
	source infra/local/env.sh && infra/local/moto-apply.sh && $(CARGO) test -p relay-tests --features integration-tests

smoke: ## The Quick start end to end: relay-gcf plus `relay send`, payloads compared byte for byte
	$(CARGO) build -p relay-gcf -p relay-cli
	infra/local/smoke.sh

emulators-up: ## Start moto (SQS, SNS, S3, DynamoDB), fake-gcs-server and the Pub/Sub and Firestore emulators on 127.0.0.1
	infra/local/emulators.sh start

emulators-down: ## Stop the emulators started by emulators-up (by process id)
	infra/local/emulators.sh stop

lambda-tools: $(TOOLS)/bin/cargo-lambda ## Install cargo-lambda and zig into .venv-tools, and the Rust targets of both Lambda architectures
	@for triple in $(foreach a,$(LAMBDA_ARCHS),$(LAMBDA_TRIPLE_$(a))); do \
	  rustup target list --installed | grep -qx "$$triple" || rustup target add "$$triple" \
	    || { echo "lambda-tools: cannot install the Rust target $$triple (rustup target add $$triple)" >&2; exit 1; }; \
	done

$(TOOLS)/bin/cargo-lambda:
	python3 -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check cargo-lambda ziglang

# Cargo features added to relay-lambda's defaults (sqs, sns, secrets, s3, dynamodb), e.g.
# LAMBDA_FEATURES=pubsub, aws-lc (the AWS clients' TLS on aws-lc rather than ring), or transform
# (destinations' jq transforms, about 2 MB of binary).
LAMBDA_FEATURES ?=
LAMBDA_FEATURE_ARGS = $(if $(LAMBDA_FEATURES),--features $(LAMBDA_FEATURES))

# `make lambda` builds one zip per instruction set under cargo's target directory (CARGO_TARGET_DIR
# when set, as cargo itself does), each with a file "architecture" ("arm64" or "x86_64") next to
# it, which the aws-relay module reads so the function's architecture always matches the build:
#   $(LAMBDA_DIR)/arm64/relay-lambda/bootstrap.zip and $(LAMBDA_DIR)/x86_64/relay-lambda/bootstrap.zip,
# and $(LAMBDA_DIR)/relay-lambda/bootstrap.zip, a copy of the LAMBDA_ARCH one (the examples' default).
# Both are linked by zig against glibc $(LAMBDA_GLIBC), the glibc of provided.al2023, whatever the
# host's C library; lambda-check refuses a bootstrap that needs a newer glibc symbol. The
# architecture files are removed first and written only once both zips pass, so a failed build or
# check leaves none behind. lambda-check alone checks and records zips already built.
LAMBDA_DIR = $(or $(CARGO_TARGET_DIR),target)/lambda
LAMBDA_ARCHS := arm64 x86_64
LAMBDA_ARCH ?= arm64
LAMBDA_TRIPLE_arm64 := aarch64-unknown-linux-gnu
LAMBDA_TRIPLE_x86_64 := x86_64-unknown-linux-gnu
# A target triple as cargo's environment spells it: CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_….
upper = $(shell echo '$(1)' | tr 'a-z-' 'A-Z_')
LAMBDA_GLIBC := 2.34
LAMBDA_BUILDS := $(addprefix lambda-build-,$(LAMBDA_ARCHS))
LAMBDA_ARCH_FILES = $(LAMBDA_DIR)/relay-lambda/architecture $(foreach a,$(LAMBDA_ARCHS),$(LAMBDA_DIR)/$(a)/relay-lambda/architecture)

lambda: $(LAMBDA_BUILDS) ## Build bootstrap.zip for arm64 and x86_64 (zig, glibc 2.34) under $CARGO_TARGET_DIR or target/, then lambda-check
	@$(MAKE) --no-print-directory lambda-check

# One static pattern rule per instruction set (`make lambda-build-x86_64` builds just that one).
# --compiler cargo-zigbuild is explicit, so neither CARGO_LAMBDA_COMPILER nor a package's metadata
# can switch the build to the host's C toolchain.
# The bootstrap is linked without unwind tables (crates/relay-lambda/link/no-unwind-tables.ld says
# why), through the target's rustflags, so host builds are untouched; RUSTFLAGS, when set, replaces
# them (cargo's order), and the tables stay.
LAMBDA_LINK_ARGS := -C link-arg=-Wl,--no-eh-frame-hdr -C link-arg=-Wl,-T,$(CURDIR)/crates/relay-lambda/link/no-unwind-tables.ld
# $(call lambda_build,ARCH,DIR,ARGS): relay-lambda for ARCH into DIR, with cargo-lambda's ARGS.
lambda_build = CARGO_TARGET_$(call upper,$(LAMBDA_TRIPLE_$(1)))_RUSTFLAGS="$(LAMBDA_LINK_ARGS)" \
	$(CARGO) lambda build --profile lambda --compiler cargo-zigbuild --target $(LAMBDA_TRIPLE_$(1)).$(LAMBDA_GLIBC) \
	  --lambda-dir $(2) -p relay-lambda $(3)
$(LAMBDA_BUILDS): lambda-build-%: lambda-tools
	@rm -f $(LAMBDA_ARCH_FILES)
	$(call lambda_build,$*,$(LAMBDA_DIR)/$*,$(LAMBDA_FEATURE_ARGS) --output-format zip)

# The zips' size budget, 3.6 MiB, holds for the default features (docs/performance.md#sizes);
# a build with LAMBDA_FEATURES (pubsub: Google's clients; aws-lc) is not held to it.
LAMBDA_ZIP_MAX := 3774873
lambda-check: ## Check the built zips (glibc at most 2.34, instruction set, size), record each one's architecture, copy the LAMBDA_ARCH one
	@rm -f $(LAMBDA_ARCH_FILES)
	infra/local/lambda-glibc.sh --max $(LAMBDA_GLIBC) --arch arm64 $(LAMBDA_DIR)/arm64/relay-lambda/bootstrap.zip
	infra/local/lambda-glibc.sh --max $(LAMBDA_GLIBC) --arch x86_64 $(LAMBDA_DIR)/x86_64/relay-lambda/bootstrap.zip
	@$(if $(LAMBDA_FEATURES),true,for a in $(LAMBDA_ARCHS); do \
	  zip=$(LAMBDA_DIR)/$$a/relay-lambda/bootstrap.zip; size=$$(stat -c %s $$zip); \
	  if [ $$size -gt $(LAMBDA_ZIP_MAX) ]; then \
	    echo "lambda-check: $$zip is $$size bytes, over the budget of $(LAMBDA_ZIP_MAX)" >&2; exit 1; \
	  fi; echo "lambda-check: ok $$zip: $$size bytes (at most $(LAMBDA_ZIP_MAX))"; done)
	$(foreach a,$(LAMBDA_ARCHS),echo $(a) > $(LAMBDA_DIR)/$(a)/relay-lambda/architecture;)
	mkdir -p $(LAMBDA_DIR)/relay-lambda
	cp $(LAMBDA_DIR)/$(LAMBDA_ARCH)/relay-lambda/bootstrap.zip $(LAMBDA_DIR)/relay-lambda/bootstrap.zip
	cp $(LAMBDA_DIR)/$(LAMBDA_ARCH)/relay-lambda/architecture $(LAMBDA_DIR)/relay-lambda/architecture
	@ls -l $(foreach a,$(LAMBDA_ARCHS),$(LAMBDA_DIR)/$(a)/relay-lambda/bootstrap.zip) $(LAMBDA_DIR)/relay-lambda/bootstrap.zip
	@echo "lambda: deploy $(LAMBDA_DIR)/relay-lambda/bootstrap.zip ($(LAMBDA_ARCH)), or the other one with lambda_zip_path"

tf-check: ## terraform fmt -check, validate of the AWS modules and examples and a plan of aws-relay with every toggle off and on (mocked provider), against the cached provider, checkov (offline)
	infra/local/tf-check.sh
	$(CARGO) test --workspace --all-features --test terraform

IMAGE ?= relay-gcf:dev
# Cloud Run runs linux/amd64 images only: the platform is fixed, so an arm64 builder (Apple
# silicon, Graviton) still produces an image Cloud Run can start (built under emulation there).
image: ## Build the relay-gcf image for linux/amd64 (infra/docker/Dockerfile); needs a Docker engine with BuildKit
	@command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 || { echo "image: no Docker engine here; build where one runs, or with Cloud Build" >&2; exit 1; }
	DOCKER_BUILDKIT=1 docker build --platform linux/amd64 -f infra/docker/Dockerfile -t $(IMAGE) .

bench: ## Routing benchmark (criterion): 20 routes against the parse and catch-all baselines
	$(CARGO) bench -p relay-core --features fast-regex --bench route

# BENCH_ONLY=cold (relay-lambda's cold starts under Lambda's CPU quotas) needs root: it makes a
# cgroup v1 cpu cgroup per start under /sys/fs/cgroup/cpu (docs/performance.md). The cold starts
# are of the bootstrap `make lambda` builds, with the default features, for this machine's
# instruction set, in a folder of its own (the deployable zips are left as they are); a release
# relay-lambda built with relay-gcf would share relay-gcf's features (Google's clients, SQLite).
BENCH_LAMBDA_ARCH := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x86_64)
BENCH_LAMBDA_DIR = $(or $(CARGO_TARGET_DIR),target)/bench-lambda
bench-load: lambda-tools ## relay-gcf's cost per notification against a bare floor, and the Lambda bootstrap's cold starts and warm invocations, on loopback (release build)
	$(call lambda_build,$(BENCH_LAMBDA_ARCH),$(BENCH_LAMBDA_DIR),)
	$(CARGO) build --release -p relay-gcf -p relay-cli -p relay-bench --features relay-gcf/dynamodb,relay-gcf/s3,relay-gcf/firehose
	BENCH_LAMBDA=$(BENCH_LAMBDA_DIR)/relay-lambda/bootstrap taskset -c 1 $(or $(CARGO_TARGET_DIR),target)/release/bench-load

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
FUZZ_TARGETS := signature_header verification intake notification pattern config_file \
	stripe_signature standard_webhooks rfc9421 slack body_hmac hmac_template archive_record transform

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

lint: ## rustfmt check and clippy with warnings as errors, all features and the smallest builds
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	# relay-core with no destination, relay-gcf with Google's only (docs/performance.md), and
	# relay-lambda as `make lambda` builds it (the AWS clients' TLS on ring): code that needs an
	# optional dependency must stay behind its feature.
	$(CARGO) clippy -p relay-core --no-default-features -- -D warnings
	$(CARGO) clippy -p relay-gcf --no-default-features --features pubsub,gcs -- -D warnings
	$(CARGO) clippy -p relay-lambda -- -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

clean-run: ## Forget the development key, the local file sink and the local ledger
	rm -rf target/run target/smoke
