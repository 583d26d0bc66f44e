# Graduator: graduates CustomResourceDefinitions from one API version to the next.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
BIN := $(CURDIR)/bin
# envtest binaries: KUBEBUILDER_ASSETS set by the user wins; else bin/k8s,
# filled by `make envtest-assets`.
ENVTEST_ASSETS_DIR := $(BIN)/k8s
KUBEBUILDER_ASSETS ?= $(ENVTEST_ASSETS_DIR)
export KUBEBUILDER_ASSETS

CONTROLLER_GEN := $(GO) tool controller-gen
GOLANGCI_LINT_VERSION ?= v2.7.2
# Seconds each fuzz target runs during `make test`.
FUZZTIME ?= 10s
IMG ?= ghcr.io/graduator/graduator:dev

.PHONY: all
all: build

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate the CRD and RBAC manifests from the controller-gen markers, and the Pizza CRD stages.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." paths="./cmd/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) crd paths="./conversion/..." output:crd:artifacts:config=config/samples/pizza/base
	$(GO) run ./hack/pizzastages

.PHONY: generate
generate: ## Generate the deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./..."

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## gofmt, go vet, and golangci-lint when it installs.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [ -x "$(BIN)/golangci-lint" ] || GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) >/dev/null 2>&1; then \
		$(BIN)/golangci-lint run ./...; \
	else \
		echo "golangci-lint $(GOLANGCI_LINT_VERSION) could not be installed; skipped"; \
	fi

##@ Test

.PHONY: envtest-assets
envtest-assets: ## Put kube-apiserver and etcd into bin/k8s (downloads, or builds them from Go modules).
	@if [ "$(KUBEBUILDER_ASSETS)" != "$(ENVTEST_ASSETS_DIR)" ]; then \
		echo "KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) is set; using it"; \
	else \
		hack/envtest-assets.sh $(ENVTEST_ASSETS_DIR); \
	fi

.PHONY: test
test: envtest-assets fuzz ## Unit tests, short fuzz runs and the envtest suites against a real kube-apiserver.
	$(GO) test ./... -count=1 -timeout 30m

.PHONY: test-faults
test-faults: envtest-assets ## The fault suite at full size (SIGKILLs, webhook and API server outages, admission denial, pause); records docs/reliability.md.
	FAULTS_SIZE=full $(GO) test ./test/faults/ -count=1 -timeout 60m -v -ginkgo.v

FUZZ_TARGETS := FuzzHubRoundTrip FuzzV1alpha1RoundTrip FuzzV1beta1RoundTrip

.PHONY: fuzz
fuzz: ## Fuzz the Pizza round-trip conversions for $(FUZZTIME) each.
	@for target in $(FUZZ_TARGETS); do \
		echo "fuzzing $$target for $(FUZZTIME)"; \
		$(GO) test ./conversion/ -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

.PHONY: demo
demo: envtest-assets ## A whole graduation on an embedded control plane, narrated. No cluster needed.
	$(GO) run ./hack/demo $(DEMO_ARGS)

N ?= 5000
SECTIONS ?= small,big,polite,operator,rss,crds,snapshot
.PHONY: bench
bench: envtest-assets ## The benchmark (docs/benchmarks.md): engine vs GET+PUT vs 64-writer ceiling on small and 16 KB objects, politeness, the operator's flip-to-prune time, peak RSS, manager RSS vs CRD count, the CLI's RSS on a 20,000-object snapshot. SECTIONS=small,big,curve,polite,operator,rss,crds,snapshot selects parts (curve is not in the default).
	$(GO) build -o $(BIN)/bench ./test/bench
	GO=$(GO) $(BIN)/bench -n $(N) -sections $(SECTIONS)

##@ Build

.PHONY: build
build: ## Build every binary into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: docker-build
docker-build: ## Build the operator image.
	docker build -t $(IMG) .

##@ Deploy

.PHONY: install
install: ## Install the CRDVersionPolicy CRD into the cluster of the current kubeconfig.
	kubectl apply -k config/crd

.PHONY: deploy
deploy: ## Deploy the operator into the cluster of the current kubeconfig.
	cd config/manager && kustomize edit set image controller=$(IMG)
	kubectl apply -k config/default

.PHONY: undeploy
undeploy: ## Remove the operator from the cluster.
	kubectl delete -k config/default --ignore-not-found
