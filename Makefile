# Graduator: graduates CustomResourceDefinitions from one API version to the next.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
BIN := $(CURDIR)/bin
# The Kubernetes release the envtest suites run on: `make test` runs 1.37.2;
# `make test-compat K8S=1.30.14` runs the suites that depend on the API
# server on another one. K8S_MATRIX is what `make test-compat-all` runs and
# the README's table lists (the oldest first: .ci/run runs it too).
K8S ?= 1.37.2
K8S_MATRIX ?= 1.30.14 1.34.12 1.37.2
K8S_MINOR := $(word 2,$(subst ., ,$(K8S)))
# envtest binaries: KUBEBUILDER_ASSETS set by the user wins; else
# bin/k8s/<release>, filled by `make envtest-assets`. kube-controller-manager
# is built only where the in-tree StorageVersionMigration (1.37+) runs.
ENVTEST_ASSETS_DIR := $(BIN)/k8s/$(K8S)
ENVTEST_CONTROLLER_MANAGER ?= $(shell [ "$(K8S_MINOR)" -ge 37 ] 2>/dev/null && echo true || echo false)
KUBEBUILDER_ASSETS ?= $(ENVTEST_ASSETS_DIR)
export KUBEBUILDER_ASSETS
# envtest waits 20 s for each control plane process by default; a loaded
# 2-core machine running several suites at once can take longer to start
# kube-apiserver 1.37.
KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 90s
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT

CONTROLLER_GEN := $(GO) tool controller-gen
GOLANGCI_LINT_VERSION ?= v2.7.2
# Executions of each fuzz target during `make test`: a count, not a duration,
# since a -fuzztime deadline that falls while an input is minimized fails the
# run with "context deadline exceeded".
FUZZTIME ?= 40000x
IMG ?= ghcr.io/graduator/graduator:dev
# helm, built from the Go module proxy (not a dependency of go.mod: its
# Kubernetes dependencies would fight ours).
HELM_VERSION ?= v3.22.0
HELM := $(BIN)/helm-$(HELM_VERSION)
# kustomize for `make deploy`, run from the Go module proxy: no standalone install.
KUSTOMIZE ?= $(GO) run sigs.k8s.io/kustomize/kustomize/v5@v5.7.1
# What the image's labels and the release artifacts say.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)

.PHONY: all
all: build

.PHONY: help
help: ## Show the targets, by section.
	@awk 'BEGIN {FS = ":.*##"; print "Usage: make <target> [VAR=value]"} \
		/^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2} \
		/^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)
	@echo; echo "What each target does, its variables and its duration: docs/development.md"

##@ Development

.PHONY: manifests
manifests: ## Generate the CRD and RBAC manifests and the Pizza CRD stages.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." paths="./cmd/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) crd paths="./conversion/..." output:crd:artifacts:config=config/samples/pizza/base
	$(GO) run ./hack/pizzastages
	cp config/crd/bases/graduator.io_crdversionpolicies.yaml charts/graduator/crds/

.PHONY: generate
generate: ## Generate the deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./..."

.PHONY: api-surface
api-surface: ## Record the public packages' exported identifiers in api-surface/.
	$(GO) run ./hack/apisurface

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
envtest-assets: ## Put the envtest binaries of Kubernetes K8S into bin/k8s/K8S.
	@if [ "$(KUBEBUILDER_ASSETS)" != "$(ENVTEST_ASSETS_DIR)" ]; then \
		echo "KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) is set; using it"; \
	else \
		ENVTEST_K8S_VERSION=$(K8S) ENVTEST_CONTROLLER_MANAGER=$(ENVTEST_CONTROLLER_MANAGER) hack/envtest-assets.sh $(ENVTEST_ASSETS_DIR); \
	fi

.PHONY: large-files
large-files: ## Fail when git tracks a file over 1 MiB.
	hack/check-large-files.sh

.PHONY: test
test: large-files envtest-assets fuzz helm image test-examples ## Every check a change must pass (up to 30 min).
	ROBUSTNESS_SEEDS="$(ROBUSTNESS_CI_SEEDS)" HELM=$(HELM) $(GO) test ./... -count=1 -timeout 30m
	$(GO) test -tags failpoints ./internal/failpoint/ -count=1

# The robustness seeds `make test` runs (small size, 15-30 s each): seeds of
# the cover that use every rig once (test/robustness/suite_test.go).
ROBUSTNESS_CI_SEEDS ?= 2,27,29,50

# examples/ is a module of its own (users copy it), so ./... of the root
# module does not reach it. Its rehearsal takes about 15 s.
.PHONY: test-examples
test-examples: envtest-assets ## The examples/ module: vet and its upgrade rehearsal.
	cd examples && $(GO) vet ./... && KUBEBUILDER_ASSETS=$(abspath $(KUBEBUILDER_ASSETS)) $(GO) test ./... -count=1 -timeout 10m

.PHONY: test-faults
test-faults: envtest-assets ## The fault suite at full size (about 35 min).
	FAULTS_SIZE=full $(GO) test ./test/faults/ -count=1 -timeout 60m -v -ginkgo.v

.PHONY: test-robustness
test-robustness: envtest-assets ## Random fault schedules against the invariants (SEED, RUNS, SIZE, RIG, TWIN).
	ROBUSTNESS_SEED=$(SEED) ROBUSTNESS_RUNS=$(RUNS) ROBUSTNESS_SIZE=$(SIZE) ROBUSTNESS_RIG=$(RIG) ROBUSTNESS_TWIN=$(TWIN) ROBUSTNESS_RECORD=$(RECORD) $(GO) test ./test/robustness/ -count=1 -timeout 180m -v -ginkgo.v

.PHONY: test-proof-scale
test-proof-scale: envtest-assets ## A unique-value loss refused at every door, 100,000 objects (about 35 min).
	ROUNDTRIP_UNIQUE_N=100000 $(GO) test ./test/roundtrip/ -count=1 -timeout 60m -v -ginkgo.v -ginkgo.focus "only one object"

.PHONY: test-ha
test-ha: envtest-assets ## The HA suite with one API server 25 s late (make test runs it at 8 s).
	HA_LAG=25s $(GO) test ./test/ha/ -count=1 -timeout 15m -v -ginkgo.v

.PHONY: test-quota
test-quota: envtest-assets ## The etcd space suite (about 20 min; RECORD=1 writes its table).
	QUOTA_SUITE=1 QUOTA_RECORD=$(RECORD) $(GO) test ./test/quota/ -count=1 -timeout 30m -v -ginkgo.v

# The suites whose behaviour depends on the API server: the policy API and
# the chart's RBAC, APF objects and secure metrics installed (integration), the
# conversion webhook, the engine and the CLI with `check cluster` (migration),
# the operator's managed, GitOps and fleet graduations (graduation), the
# fault suite at its reduced size, crdmigrate (embed), the rehearsal kit
# (graduationtest), and the in-tree StorageVersionMigration (intree: 1.37+;
# before that, only its refusal runs and the rest skips with the release it
# needs). test/chart renders the chart the others install.
# Ginkgo suites, run with -ginkgo.v so that each skipped spec prints its
# reason, and plain go tests.
COMPAT_SUITES := ./test/integration ./test/conversion ./test/migration ./test/graduation ./test/faults \
	./test/embed ./test/intree
COMPAT_TESTS := ./test/chart ./graduationtest

# The whole -v log goes to a file; what a reader needs (each package's
# outcome, each skip with its reason, the spec counts) is printed.
COMPAT_LOG = $(BIN)/test-compat-$(K8S).log
COMPAT_SUMMARY = grep -E '^(ok|FAIL|--- SKIP|--- FAIL)|\[SKIPPED\]|needs (Kubernetes|a server)|Ran [0-9]+ of' $(COMPAT_LOG) || true

.PHONY: test-compat
test-compat: helm ## The API-server-dependent suites on Kubernetes K8S (K8S=1.30.14).
	@echo "--- Kubernetes $(K8S): envtest binaries"
	ENVTEST_K8S_VERSION=$(K8S) ENVTEST_CONTROLLER_MANAGER=$(ENVTEST_CONTROLLER_MANAGER) hack/envtest-assets.sh $(ENVTEST_ASSETS_DIR)
	@echo "--- Kubernetes $(K8S): $(COMPAT_SUITES) $(COMPAT_TESTS) examples/ (log: $(COMPAT_LOG))"
	{ KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS_DIR) HELM=$(HELM) $(GO) test $(COMPAT_SUITES) -count=1 -timeout 30m -v -args -ginkgo.v -ginkgo.no-color && \
		KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS_DIR) HELM=$(HELM) $(GO) test $(COMPAT_TESTS) -count=1 -timeout 10m -v; } \
		> $(COMPAT_LOG) 2>&1 || { tail -n 300 $(COMPAT_LOG); $(COMPAT_SUMMARY); exit 1; }
	@$(COMPAT_SUMMARY)
	cd examples && KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS_DIR) $(GO) test ./... -count=1 -timeout 10m

.PHONY: test-compat-all
test-compat-all: ## make test-compat on every release of K8S_MATRIX.
	@for release in $(K8S_MATRIX); do \
		$(MAKE) --no-print-directory test-compat K8S=$$release || exit 1; \
	done

FUZZ_TARGETS := FuzzHubRoundTrip FuzzV1alpha1RoundTrip FuzzV1beta1RoundTrip

.PHONY: fuzz
fuzz: ## Fuzz the Pizza round-trip conversions FUZZTIME executions each.
	@for target in $(FUZZ_TARGETS); do \
		echo "fuzzing $$target for $(FUZZTIME)"; \
		$(GO) test ./conversion/ -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) || exit 1; \
	done

##@ Try and measure

.PHONY: demo
demo: envtest-assets ## A whole graduation on an embedded control plane, narrated.
	$(GO) run ./hack/demo $(DEMO_ARGS)

N ?= 5000
# How many interleaved rounds the small and big sections run.
ROUNDS ?= 1
SECTIONS ?= small,big,curve,polite,webhook,intree,operator,rss,crds,snapshot,proof,scale
PLOTS ?= docs/bench
# The scale section's population sizes in `make bench`: its 100,000-object point.
SCALE_NS ?= 6000,100000
# Where each section's report is written, between its markers (DOCS= for none).
DOCS ?= docs/benchmarks.md
.PHONY: bench
bench: envtest-assets helm ## The benchmark of docs/benchmarks.md (N, SECTIONS, PLOTS, DOCS).
	$(GO) build -o $(BIN)/bench ./test/bench
	GO=$(GO) $(BIN)/bench -n $(N) -rounds $(ROUNDS) -sections $(SECTIONS) -plots $(PLOTS) -scale-ns $(SCALE_NS) -docs "$(DOCS)"

# Not in CI nor in `make test`: about an hour of a quiet machine at N=1000000.
.PHONY: bench-fleet
bench-fleet: envtest-assets ## graduator scan of three clusters of 300 CRDs, and of one.
	$(GO) test ./test/fleet/ -run '^$$' -bench Scan -benchtime 5x -timeout 20m

.PHONY: bench-scale
bench-scale: N = 1000000
bench-scale: SCALE_CACHED_NS ?= 6000,100000
bench-scale: SCALE_OPERATOR_MAX ?= 0
bench-scale: SCALE_ROUNDS ?= 4
bench-scale: envtest-assets ## The scale run, cache on to 100,000 (4 rounds), off at N (~3 h).
	$(GO) build -o $(BIN)/bench ./test/bench
	GO=$(GO) $(BIN)/bench -sections scale -scale-ns $(SCALE_CACHED_NS) -rounds $(SCALE_ROUNDS) -watch-cache=true -scale-operator-max $(SCALE_OPERATOR_MAX) -docs "$(DOCS)"
	GO=$(GO) $(BIN)/bench -sections scale -scale-ns $(N) -watch-cache=false -scale-operator-max $(SCALE_OPERATOR_MAX) -docs "$(DOCS)"

##@ Build

.PHONY: build
build: ## Build every binary into bin/.
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: image
image: ## Build the OCI image without Docker (bin/image, bin/graduator-image.tar).
	rm -rf $(BIN)/image-binaries && mkdir -p $(BIN)/image-binaries
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags="-s -w" -o $(BIN)/image-binaries/ \
		./cmd/manager ./cmd/graduator ./cmd/sample-webhook
	cd hack/image && $(GO) run . -binaries $(BIN)/image-binaries -arch $(IMAGE_ARCH) \
		-oci-layout $(BIN)/image -tarball $(BIN)/graduator-image.tar -tag $(IMG) \
		-version $(VERSION) -revision "$(REVISION)" -created $(SOURCE_DATE_EPOCH)

.PHONY: docker-build
docker-build: ## Build the same image with a Docker daemon.
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .

.PHONY: helm
helm: $(HELM) ## Build the pinned helm from the Go module proxy into bin/.
$(HELM):
	rm -rf $(BIN)/.helm-build
	GOBIN=$(BIN)/.helm-build $(GO) install -ldflags="-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" \
		helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/.helm-build/helm $@ && rmdir $(BIN)/.helm-build
	ln -sf $(notdir $@) $(BIN)/helm

.PHONY: chart-lint
chart-lint: helm ## helm lint the chart, plain and with every option on.
	$(HELM) lint --strict charts/graduator
	$(HELM) lint --strict charts/graduator --set replicas=2 --set 'rbac.migrateGroups={example.com}' \
		--set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set dashboards.enabled=true

RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST := $(CURDIR)/dist

.PHONY: release-artifacts
release-artifacts: ## The CLI's krew archives, checksums and manifest in dist/.
	rm -rf $(DIST) && mkdir -p $(DIST)
	for platform in $(RELEASE_PLATFORMS); do \
		os=$${platform%/*}; arch=$${platform#*/}; dir=$(DIST)/graduator_$${os}_$${arch}; \
		mkdir -p $$dir; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags="-s -w" -o $$dir/kubectl-graduator ./cmd/graduator; \
		tar -C $$dir -czf $(DIST)/kubectl-graduator_$(VERSION)_$${os}_$${arch}.tar.gz --owner=0 --group=0 --numeric-owner \
			--mtime=@$(SOURCE_DATE_EPOCH) --sort=name .; \
		rm -rf $$dir; \
	done
	cd $(DIST) && sha256sum kubectl-graduator_*.tar.gz > checksums.txt
	VERSION=$(VERSION) DIST=$(DIST) hack/krew/render.sh > $(DIST)/graduator.yaml
	@echo "wrote $(DIST):"; ls -1 $(DIST)

##@ Deploy

.PHONY: install
install: ## Install the CRDVersionPolicy CRD into the current kubeconfig's cluster.
	kubectl apply -k config/crd

.PHONY: deploy
deploy: ## Deploy the operator with kustomize into the current kubeconfig's cluster.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | kubectl apply -f -
	$(KUSTOMIZE) build config/rbac/space-ledger | kubectl apply -f -

.PHONY: undeploy
undeploy: ## Remove the operator from the cluster.
	kubectl delete -k config/rbac/space-ledger --ignore-not-found
	kubectl delete -k config/default --ignore-not-found
