# gitops-reverser. Everything a target needs beyond Go, git, gcc and node is built from the Go
# module proxy or installed from npm or Debian's archive, at a pinned version, and cached under
# $(TOOLS_CACHE) (Debian's chromium in /usr/bin), so only the first run pays. Debian's gnupg and
# openssh-client are the exception: any version verifies signatures (see signing-tools).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

TOOLS_CACHE ?= $(HOME)/.cache/gitops-reverser/tools
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS_CACHE)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
CHART := deploy/helm/gitops-reverser
# Every tool the tests run is built by testenv, as the tests build it (testenv/sops.go): without
# debugging information, which the links strip anyway and which costs a tenth of the compiler's
# time, and all but the control plane, helm and promtool (sops, cosign, crane, Gitea) also without
# optimisations or inlining, which takes their cold build an eighth to a third less CPU. The
# standard library keeps the default flags, so it is compiled once for every build. The tests
# build with TOOL_GCFLAGS too.
TOOL_GCFLAGS := -gcflags=all=-dwarf=false -gcflags=std=
# testenv/gitea.go builds the same Gitea (a Git host with pull requests, which the pull-request tests
# run) into the same place, with the options, templates and public folders it serves next to it;
# a test keeps its version equal to this one.
GITEA_VERSION := v1.26.0
GITEA := $(TOOLS_CACHE)/gitea-$(GITEA_VERSION)/gitea
# testenv/browser.go drives a headless Chromium with the same playwright-core from the same place
# (installing it there too when missing); a test keeps its version equal to this one.
PLAYWRIGHT_VERSION := 1.64.1
PLAYWRIGHT_DIR := $(TOOLS_CACHE)/playwright-core-$(PLAYWRIGHT_VERSION)
PLAYWRIGHT := $(PLAYWRIGHT_DIR)/node_modules/playwright-core
# Debian's chromium, not a browser build of playwright's own (which nothing here can download).
# Security updates replace the archive's version, so make chromium falls back to the current one,
# with a warning, once this one is gone: update it then (apt-cache policy chromium).
CHROMIUM_VERSION := 156.0.8078.79-1~deb12u1
CHROMIUM ?= /usr/bin/chromium
GPG ?= gpg
SSH_KEYGEN ?= ssh-keygen
TEST_TIMEOUT ?= 30m
# The version make build and make image stamp into the daemon (--version) and tag the image with:
# git describe without a leading v (a release tag v0.1.0 gives 0.1.0, the chart's appVersion; an
# untagged commit its short hash), -dirty when tracked files changed. SOURCE_DATE_EPOCH, the
# commit's time, dates the image, so the same commit gives the same digest (docs/image.md).
VERSION ?= $(or $(shell git describe --tags --always --dirty 2>/dev/null | sed 's/^v//'),dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(or $(shell git log -1 --format=%ct 2>/dev/null),0)
VERSION_LDFLAGS = -X github.com/configbutler/gitops-reverser/daemon.Version=$(VERSION)

.PHONY: all build image release publish test later-tools clitools flux testenv-cmd debian-packages vet lint helm-lint gitea browser playwright chromium signing-tools testenv testenv-bins demo bench clean

all: build

build: ## the daemon binary in bin/, built as the image builds it (static, stripped)
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w $(VERSION_LDFLAGS)" -o bin/gitops-reverser .

# scripts/release image cross-compiles the daemon (CGO_ENABLED=0 GOOS=linux GOARCH=... go build -trimpath
# -ldflags="-s -w -X ...Version=$(VERSION)", printed as it runs) and assembles the image from
# nothing with go-containerregistry: no container engine, no base image, no registry.
image: ## the daemon's OCI image (linux/amd64 + linux/arm64) and its SPDX SBOM in bin/image/ (docs/image.md)
	go run ./scripts/release image -out bin/image -version '$(VERSION)' -revision '$(REVISION)' -created '$(SOURCE_DATE_EPOCH)'

# make release builds the image, the chart, the binaries and a krew manifest from the commit
# checked out (refusing a tree with changes, and a commit the tag v$(VERSION) is not at, where the
# krew manifest downloads from, unless SNAPSHOT=1 says it is a trial), and signs them with the
# cosign key $(COSIGN_KEY), whose password is $COSIGN_PASSWORD in the environment; make publish
# pushes bin/release to REGISTRY (e.g. ghcr.io/configbutler) with Docker's credentials and prints
# how to verify and install it (docs/release.md).
release: ## a signed, attested release of VERSION, at its tag v<VERSION> (or SNAPSHOT=1), in bin/release/: image, chart, binaries, checksums, krew manifest (docs/release.md)
	go run ./scripts/release build -out bin/release -version '$(VERSION)' $(if $(COSIGN_KEY),-key '$(COSIGN_KEY)') $(if $(filter 1,$(SNAPSHOT)),-snapshot)

publish: ## push bin/release to REGISTRY=<registry>/<owner> and print the commands that verify and install it
	go run ./scripts/release publish -from bin/release $(if $(REGISTRY),-registry '$(REGISTRY)')

# STEP runs a step of make test and records its wall and CPU time in STEP_LOG (scripts/steptime).
STEP_LOG := bin/test-steps.tsv
STEP = scripts/steptime $(STEP_LOG)

# TESTENV is testenv's command (testenv/cmd/testenv), built once per make run before the targets
# that run it, so targets made side by side (-j) do not each compile it.
TESTENV := bin/testenv
testenv-cmd:
	@mkdir -p bin
	$(STEP) testenv-cmd go build -o $(TESTENV) ./testenv/cmd/testenv

testenv-bins: testenv-cmd ## build (once) the pinned etcd, kube-apiserver, kubectl, helm and promtool used by tests
	$(STEP) 'control plane, helm, promtool' $(TESTENV) -build

# The tests build as the image does (CGO_ENABLED=0 and -trimpath, make image's go build) and with
# the tools' compiler flags (TOOL_GCFLAGS), so go vet, every test binary, the daemon binaries the
# install, image and daemon tests build, and the control plane's programs share one set of
# compiled packages: testenv/tools pins the versions of go.mod for every module both use
# (TestToolsShareTheModuleVersions). On a fresh machine go vet and the tests wait for the control
# plane, since every test package starts one; the other tools (later-tools) build beside it and
# then beside the tests, and a test that needs one waits for it (testenv's file locks). Their output is in
# $(LATER_TOOLS_LOG), printed when a build fails. go test does not vet (-vet=off): go vet ./... has
# just run every analyzer over the same packages and their test files, and go test's smaller set,
# whose flags are part of the cache key, would analyse every dependency again. It runs four
# packages at a time (-p 4), not one per core: a test binary spends much of its time waiting (on
# an apiserver, a push, a timer), and the core it leaves idle goes to the next package's build
# and tests. The test binaries are linked without DWARF (-ldflags=-w; a build that sets its own
# -ldflags, as the daemon's does, keeps them): their stack traces come from Go's own tables, and
# relinking the daemon package's test binary (go test -c) takes 4.7 CPU-s instead of 5.5.
# Each step's wall and CPU time goes to $(STEP_LOG) (scripts/steptime), each package's tests too
# (go test -exec): make test ends with the table of steps, longest first, and the test packages
# that took the most CPU.
LATER_TOOLS_LOG := $(TOOLS_CACHE)/later-tools.log
test: export CGO_ENABLED := 0
test: export GOFLAGS := $(strip $(GOFLAGS) -trimpath $(TOOL_GCFLAGS) -ldflags=-w)
test: ## vet and run every test against a real apiserver and real git remotes
	@mkdir -p bin $(TOOLS_CACHE); rm -f $(STEP_LOG); echo $$EPOCHSECONDS > bin/test-started
	@$(MAKE) --no-print-directory testenv-cmd
	@$(MAKE) --no-print-directory -j later-tools > $(LATER_TOOLS_LOG) 2>&1 & later=$$!; \
	  status=0; \
	  $(MAKE) --no-print-directory -j testenv-bins debian-packages playwright && \
	  $(STEP) 'go vet' go vet ./... && \
	  $(STEP) 'go test (build and run)' go test -exec '$(CURDIR)/scripts/steptime --exec $(CURDIR)/$(STEP_LOG)' -count=1 -vet=off -p 4 -timeout $(TEST_TIMEOUT) ./... || status=$$?; \
	  if ! wait $$later; then cat $(LATER_TOOLS_LOG) >&2; echo "make test: building the tools failed (above)" >&2; status=1; fi; \
	  scripts/steptime --report $(STEP_LOG) $$(( EPOCHSECONDS - $$(cat bin/test-started) )); \
	  exit $$status

# later-tools are the tools the tests run that not every test package needs. Gitea builds beside
# the other two, Flux after the CLI tools: the modules testenv/clitools and testenv/flux require the
# same versions of the modules they share (TestCLIToolsShareFluxsModuleVersions), so Flux's build
# finds most of its packages (the cloud KMS and registry clients, Sigstore, client-go) compiled by
# the CLI tools' (75 CPU-s instead of 161); two go builds at once would each compile their own.
# make flux alone does not wait for (or build) the CLI tools.
later-tools: clitools gitea flux
ifneq ($(filter later-tools,$(MAKECMDGOALS)),)
flux: clitools
endif

# Debian's packages are installed one after the other: two apt-get at once would fight over
# dpkg's lock.
debian-packages:
	@$(STEP) chromium $(MAKE) --no-print-directory chromium
	@$(STEP) 'gnupg, openssh-client' $(MAKE) --no-print-directory signing-tools

vet:
	go vet ./...

lint: $(GOLANGCI_LINT) helm-lint ## gofmt, go vet, golangci-lint, helm lint
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	GOBIN=$(dir $@) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# helm (like promtool) is pinned in testenv/tools/go.mod and built with the control plane
# (testenv-bins), with which it shares most of its packages.
helm-lint: testenv-bins ## helm lint the chart with its default values and with every option on
	helm=$$($(TESTENV) -build | sed -n 's/^helm: *//p'); \
	  "$$helm" lint --strict $(CHART) && \
	  "$$helm" lint --strict $(CHART) --values $(CHART)/ci/all-options-values.yaml

# testenv builds each tool under a lock that a test needing the same tool waits on, and in a
# scratch folder first, so nothing ever runs a half-written binary.

gitea: $(GITEA) ## build (once) the pinned Gitea the pull-request tests run

# go install cannot build Gitea (its go.mod has replace directives): testenv.EnsureGitea builds a
# copy of its module with cgo (sqlite) into a scratch directory and moves it into place.
$(GITEA): | testenv-cmd
	$(STEP) $(notdir $(@D)) env TOOLS_CACHE=$(TOOLS_CACHE) $(TESTENV) -gitea

# The command-line programs the tests judge with (sops, cosign 3 and 2, crane), pinned by the
# module testenv/clitools and built together, as the tests build them (testenv.EnsureCLITools), into
# $(TOOLS_CACHE)/clitools-<key>/.
clitools: testenv-cmd ## build (once) the pinned sops, cosign 3 and 2, and crane the tests check with
	$(STEP) 'sops, cosign 3 and 2, crane' $(TESTENV) -clitools

# Flux's source-controller and kustomize-controller, pinned by the module testenv/flux, built
# together with their CRDs beside them, as the tests build them (testenv.EnsureFlux), into
# $(TOOLS_CACHE)/flux-<key>/.
flux: testenv-cmd ## build (once) the pinned Flux controllers the Flux tests run
	$(STEP) 'flux controllers' $(TESTENV) -flux

browser: playwright chromium ## install (once) the headless Chromium and playwright-core the browser tests drive

playwright: $(PLAYWRIGHT)/package.json ## install (once) the pinned playwright-core from npm

# Installed into a scratch directory and moved into place, so an interrupted install is not taken
# for a finished one. The package.json npm writes stays in the cache, not in the repository.
$(PLAYWRIGHT)/package.json:
	rm -rf $(PLAYWRIGHT_DIR).tmp
	mkdir -p $(PLAYWRIGHT_DIR).tmp
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(STEP) playwright-core npm install --prefix $(PLAYWRIGHT_DIR).tmp --no-audit --no-fund playwright-core@$(PLAYWRIGHT_VERSION)
	rm -rf $(PLAYWRIGHT_DIR)
	mv $(PLAYWRIGHT_DIR).tmp $(PLAYWRIGHT_DIR)

# APT_SETUP opens a recipe that installs Debian packages: it sets $sudo (empty as root, sudo
# otherwise, or stops with the message $(1) when neither works) and defines the shell functions
# apt (apt-get without questions) and apt_install (apt-get install, and apt-get update only when
# that fails: the lists of a fresh machine are empty or stale, while a second run should not reach
# the archive at all). Follow it with "; \" to go on with the recipe.
define APT_SETUP
if [ "$$(id -u)" = 0 ]; then sudo=; \
elif command -v sudo >/dev/null; then sudo=sudo; \
else echo "$(1)" >&2; exit 1; fi; \
apt() { $$sudo env DEBIAN_FRONTEND=noninteractive apt-get "$$@"; }; \
apt_install() { apt install -y --no-install-recommends "$$@" || { apt update && apt install -y --no-install-recommends "$$@"; }; }
endef

chromium: ## install (once) Debian's chromium, the pinned version while the archive still has it
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	$(call APT_SETUP,$(CHROMIUM) is missing and installing it needs root: install the Debian package chromium (apt-get install chromium)); \
	pinned="chromium=$(CHROMIUM_VERSION) chromium-common=$(CHROMIUM_VERSION)"; \
	if ! apt install -y --no-install-recommends $$pinned; then \
	  apt update; \
	  if apt-cache madison chromium | awk '{print $$3}' | grep -qxF '$(CHROMIUM_VERSION)'; then \
	    apt install -y --no-install-recommends $$pinned; \
	  else \
	    echo "warning: chromium $(CHROMIUM_VERSION) is gone from the archive; installing the current one (update CHROMIUM_VERSION in the Makefile)" >&2; \
	    apt install -y --no-install-recommends chromium; \
	  fi; \
	fi; \
	if [ ! -x $(CHROMIUM) ]; then echo "the Debian package chromium is installed but $(CHROMIUM) is missing" >&2; exit 1; fi; \
	$(CHROMIUM) --version

# testenv/signing.go checks with plain git that the daemon's signed commits verify: git runs gpg
# for OpenPGP signatures and ssh-keygen for SSH ones. Unlike chromium these are not pinned: the
# formats are old and stable, so whatever Debian ships verifies them (any gpg >= 2.2, any OpenSSH
# >= 8.2, whose ssh-keygen -Y find-principals git needs), and the tests check those minimums at run
# time with a clear message. GPG and SSH_KEYGEN may name other commands, e.g. to try the install.
signing-tools: ## install (once) Debian's gnupg and openssh-client, for git verify-commit in tests
	@pkgs=; \
	command -v $(GPG) >/dev/null || pkgs="$$pkgs gnupg"; \
	command -v $(SSH_KEYGEN) >/dev/null || pkgs="$$pkgs openssh-client"; \
	if [ -n "$$pkgs" ]; then \
	  $(call APT_SETUP,$(GPG) or $(SSH_KEYGEN) is missing and installing it needs root: install the Debian packages$$pkgs (apt-get install$$pkgs)); \
	  apt_install $$pkgs; \
	fi; \
	for tool in $(GPG) $(SSH_KEYGEN); do \
	  if ! command -v $$tool >/dev/null; then echo "the Debian packages$$pkgs are installed but $$tool is missing" >&2; exit 1; fi; \
	done; \
	$(GPG) --version | sed -n 1p; \
	if command -v ssh >/dev/null; then ssh -V; fi

testenv: ## start a control plane and a git server for manual use; prints a kubeconfig path
	go run ./testenv/cmd/testenv

demo: ## run the daemon against a local control plane and git repository, and show the result
	go run ./scripts/demo

BENCH_PACKAGES := ./daemon/ ./gitops/ ./notify/ ./placement/ ./receiver/ ./sanitize/ ./scripts/release/ ./sops/ ./ui/ ./webhook/

# The packages' benchmarks run one package at a time (-p 1): side by side, one package's builds and
# load took the cores another's figures were measuring.
bench: testenv-bins browser ## print speed and memory figures (tests never assert on time)
	go test -count=1 -p 1 -run '^$$' -bench . -benchtime 1x -timeout $(TEST_TIMEOUT) $(BENCH_PACKAGES)

clean:
	rm -rf bin/
