# gitops-reverser. Everything a target needs beyond Go, git and gcc is built from the Go module
# proxy at a pinned version and cached under $(TOOLS_CACHE), so only the first run pays.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

TOOLS_CACHE ?= $(HOME)/.cache/gitops-reverser/tools
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS_CACHE)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
# install/helm_test.go builds the same helm into the same place; a test keeps its version equal to this one.
HELM_VERSION := v3.22.0
HELM := $(TOOLS_CACHE)/helm-$(HELM_VERSION)/helm
CHART := deploy/helm/gitops-reverser
# testenv/sops.go builds the same sops CLI into the same place for the tests of the SOPS format;
# a test keeps its version equal to this one.
SOPS_VERSION := v3.13.3
SOPS := $(TOOLS_CACHE)/sops-$(SOPS_VERSION)/sops
TEST_TIMEOUT ?= 30m

.PHONY: all build test lint helm-lint sops testenv testenv-bins demo bench clean

all: build

build: ## the daemon binary in bin/
	go build -o bin/gitops-reverser .

testenv-bins: ## build (once) the pinned etcd, kube-apiserver and kubectl used by tests
	go run ./testenv/cmd/testenv -build

test: testenv-bins sops ## vet and run every test against a real apiserver and real git remotes
	go vet ./...
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...

lint: $(GOLANGCI_LINT) helm-lint ## gofmt, go vet, golangci-lint, helm lint
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	GOBIN=$(dir $@) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

helm-lint: $(HELM) ## helm lint the chart with its default values and with every option on
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --values $(CHART)/ci/all-options-values.yaml

$(HELM):
	GOBIN=$(dir $@) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

sops: $(SOPS) ## build (once) the pinned sops CLI the tests use to check the SOPS documents

$(SOPS):
	GOBIN=$(dir $@) go install github.com/getsops/sops/v3/cmd/sops@$(SOPS_VERSION)

testenv: ## start a control plane and a git server for manual use; prints a kubeconfig path
	go run ./testenv/cmd/testenv

demo: ## run the daemon against a local control plane and git repository, and show the result
	go run ./scripts/demo

BENCH_PACKAGES := ./daemon/ ./gitops/ ./receiver/ ./sanitize/ ./sops/ ./webhook/

bench: testenv-bins ## print speed and memory figures (tests never assert on time)
	go test -count=1 -run '^$$' -bench . -benchtime 1x -timeout $(TEST_TIMEOUT) $(BENCH_PACKAGES)

clean:
	rm -rf bin/
