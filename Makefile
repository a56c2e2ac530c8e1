# The DSS notification relay. `make help` lists the targets.
SHELL := /bin/bash
CARGO ?= cargo

.DEFAULT_GOAL := help
.PHONY: help build run test test-unit smoke lint fmt clean-run

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## Build every crate (debug)
	$(CARGO) build --workspace

run: ## Build, then start relay-gcf on 127.0.0.1:8080 with the file sink and a development key
	$(CARGO) build -p relay-gcf -p relay-cli
	infra/local/run.sh

test: test-unit smoke ## Everything the tests need, then all tests

test-unit:
	$(CARGO) test --workspace

smoke: ## The Quick start end to end: relay-gcf plus `relay send`, payloads compared byte for byte
	$(CARGO) build -p relay-gcf -p relay-cli
	infra/local/smoke.sh

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

clean-run: ## Forget the development key and the local file sink
	rm -rf target/run
