# agent-context — `make help` lists the targets.
SHELL := /usr/bin/env bash
GO    ?= go
SETUP := deploy/local/setup.sh
# One throwaway Postgres for the whole test run; every test clones its own database.
PGRUN := $(GO) run ./adapters/postgres/pgtest/pgtestrun --
TEST_FLAGS ?= -timeout 20m
BENCH ?= .
# A count, not a duration: with a -fuzztime duration Go 1.26's fuzz coordinator can
# report its own deadline as a failure with no crasher (golang/go#75804, fixed in 1.27).
FUZZTIME ?= 20000x
BIN := bin/agent-context
# The source tarball of Citus for `make test/citus` when Citus is not installed
# (deploy/local/citus.sh builds it); the caller names it, e.g. CI.
CITUS_TARBALL ?=
export CITUS_TARBALL
# The local embedder's model: `make setup` installs it here, and `make run`, the tests
# and the benchmarks read it from here (a test fails, naming `make setup`, without it).
MODEL_DIR ?= $(or $(AGENT_CONTEXT_MODEL_DIR),$(or $(AGENT_CONTEXT_DATA_DIR),$(CURDIR)/.agent-context)/models)
export AGENT_CONTEXT_MODEL_DIR := $(MODEL_DIR)
# The deployment checks are a module of their own (kustomize, compose-go, BuildKit's
# parser stay out of the service's go.mod).
MANIFESTS := deploy/manifests
# The Google A2A interop tests: a module of their own, so the official SDKs' dependency
# trees stay out of the service's module.
INTEROP := interop/a2asdk
# golangci-lint, pinned in tools/go.mod: a module of its own, so the linter's dependencies
# stay out of the service's go.mod. `go tool` builds it on first use (then from the build
# cache); a fresh machine needs nothing but Go. The configuration is .golangci.yml.
LINTER := $(GO) tool -modfile=$(CURDIR)/tools/go.mod golangci-lint run --config=$(CURDIR)/.golangci.yml

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-12s %s\n", $$1, $$2}'

.PHONY: setup
setup: ## install Postgres 15, pgvector, nginx and chromium, and fetch the embedding model, when missing (idempotent)
	@bash $(SETUP)

.PHONY: build
build: ## build bin/agent-context
	$(GO) build -trimpath -o $(BIN) ./cmd/agent-context

.PHONY: run
run: setup build ## serve on 127.0.0.1:5120 with an embedded Postgres under ./.agent-context
	./$(BIN) serve

.PHONY: test
test: setup ## run every test against a throwaway local Postgres, then the deployment checks and the A2A SDK interop tests
	$(PGRUN) $(GO) test $(TEST_FLAGS) ./...
	cd $(MANIFESTS) && $(GO) test $(TEST_FLAGS) ./...
	$(PGRUN) bash -c 'cd $(INTEROP) && $(GO) test $(TEST_FLAGS) ./...'

.PHONY: test/citus
test/citus: setup ## run every test against a local Citus cluster (coordinator + 2 workers); CITUS_TARBALL names Citus's source when it is not installed
	AGENT_CONTEXT_TEST_CITUS=1 $(PGRUN) $(GO) test $(TEST_FLAGS) ./...
	AGENT_CONTEXT_TEST_CITUS=1 $(PGRUN) bash -c 'cd $(INTEROP) && $(GO) test $(TEST_FLAGS) ./...'

.PHONY: console/screenshots
console/screenshots: setup ## retake the console screenshots under docs/console (the browser test takes them)
	$(PGRUN) env AGENT_CONTEXT_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run TestConsoleInABrowser ./cmd/agent-context/

.PHONY: test/race
test/race: setup ## run every test with the race detector
	$(PGRUN) $(GO) test -race $(TEST_FLAGS) ./...
	cd $(MANIFESTS) && $(GO) test -race $(TEST_FLAGS) ./...
	$(PGRUN) bash -c 'cd $(INTEROP) && $(GO) test -race $(TEST_FLAGS) ./...'

.PHONY: fuzz
fuzz: ## run every fuzz target (func FuzzX in a _test.go) for FUZZTIME executions each, default 20000x
	@# go test fuzzes one target per package and invocation, so targets run one by one.
	@set -euo pipefail; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -c6- | sort); do \
	    echo "fuzz $$dir $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint (every module)
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(MANIFESTS) && $(GO) vet ./...
	cd $(INTEROP) && $(GO) vet ./...
	$(LINTER) ./...
	cd $(MANIFESTS) && $(LINTER) ./...
	cd $(INTEROP) && $(LINTER) ./...

.PHONY: bench
bench: setup ## run the benchmarks (figures go in docs/benchmarks.md)
	$(PGRUN) $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -timeout 60m ./...

.PHONY: bench/locomo
bench/locomo: setup ## recall on a LoCoMo-format file: make bench/locomo LOCOMO=/path/to/conv.json (docs/recall-quality.md)
	@test -n "$(LOCOMO)" || { echo "set LOCOMO to the path of a LoCoMo-format file"; exit 2; }
	AGENT_CONTEXT_LOCOMO="$(LOCOMO)" $(PGRUN) $(GO) test -run '^$$' -bench BenchmarkLoCoMo -benchtime 1x -timeout 30m ./cmd/agent-context

.PHONY: db/reset
db/reset: ## delete the embedded Postgres data under AGENT_CONTEXT_DATA_DIR (default ./.agent-context)
	rm -rf "$${AGENT_CONTEXT_DATA_DIR:-.agent-context}/pg"
