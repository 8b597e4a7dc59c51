# Deckhouse-style virtualization module: see README.md and docs/development.md.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

D8V_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/d8-virtualization
export D8V_CACHE
K8S_VERSION := v1.37.2
K8S_BIN := $(D8V_CACHE)/k8s-$(K8S_VERSION)/bin
TOOLS_BIN := $(D8V_CACHE)/tools/bin
STATICCHECK_VERSION := v0.8.2

# Every Go module of the workspace.
MODULES := api devstack kube-api-rewriter kubevirt-core logopts virtualization-api virtualization-controller
PKGS := $(addsuffix /...,$(addprefix ./,$(MODULES)))

# The development stack (make cluster-up, make run) and the one make test starts: separate ports and
# state, so both can run side by side.
STACK ?= dev
PORT_BASE ?= 6440
TEST_STACK := test
TEST_PORT_BASE := 7440
DEVCLUSTER := bin/devcluster
# make test builds the binaries a cluster with the module runs once (E2E_BIN), and starts one such
# cluster (its record E2E_RECORD) that the e2e packages share (devstack/moduletest).
E2E_CLUSTER := bin/e2e-cluster
E2E_BIN := $(CURDIR)/bin/e2e
E2E_RECORD := $(D8V_CACHE)/stacks/$(TEST_STACK)-module.json

export PATH := $(K8S_BIN):$(PATH)

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: apt-deps
apt-deps: ## Install the Debian packages (root, idempotent): libvirt headers for cgo, QEMU, ISO tools, the guest's kernel.
	hack/install-deps.sh

.PHONY: deps
deps: apt-deps ## Also build the Kubernetes binaries, helm and kube-rbac-proxy into the machine-wide cache.
	hack/build-k8s.sh >/dev/null

.PHONY: build
build: apt-deps ## Build every binary into bin/ (virt-launcher needs the libvirt headers).
	mkdir -p bin
	go build -o bin/ $(addsuffix /cmd/...,$(addprefix ./,$(filter-out api logopts,$(MODULES))))
	ln -sf d8v bin/kubectl-virtualization # the client as a kubectl plugin: kubectl virtualization ...

# devcluster runs the service-proxy and the local-provisioner next to the control plane, and prometheus-sd next to
# Prometheus, so they are built together.
$(DEVCLUSTER): $(shell find devstack -name '*.go' -not -name '*_test.go') devstack/go.mod
	mkdir -p bin
	go build -o bin/ ./devstack/cmd/devcluster ./devstack/cmd/local-provisioner ./devstack/cmd/service-proxy ./devstack/cmd/prometheus-sd

.PHONY: cluster-up
cluster-up: deps $(DEVCLUSTER) ## Start the local control plane (idempotent); prints the kubeconfig path last.
	$(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) up

.PHONY: cluster-down
cluster-down: $(DEVCLUSTER) ## Stop everything the local stack started.
	$(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) down

.PHONY: run
run: build cluster-up ## Start the local stack with a node, install the module from charts/virtualization (helm), and run the example VM (examples/vm.yaml, the friendly API).
	guest=$$(bash hack/guest/build.sh | tail -1); \
	kv=$$($(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) module up | tail -1); \
	$(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) image-push tiny-guest "$$guest/disk.qcow2" >/dev/null; \
	kc=$$(dirname "$$kv")/admin.kubeconfig; \
	echo "Creating the example (examples/vm.yaml): the tiny guest from DVCR as a ClusterVirtualImage, a disk from it, a VM; it boots under TCG..."; \
	$(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) module example -f examples/vm.yaml; \
	prom=$$($(DEVCLUSTER) --name $(STACK) --port-base $(PORT_BASE) prometheus up | tail -1); \
	kubectl --kubeconfig "$$kc" get cvi,vd,vmip,vm -A; \
	echo; echo "The stack is up: helm release virtualization (charts/virtualization) in namespace d8-virtualization on the"; \
	echo "local node node1 (a node agent). virtualization-controller imported the tiny guest from DVCR into the"; \
	echo "ClusterVirtualImage tiny-guest, filled the VirtualDisk example-root from it, and runs the VirtualMachine"; \
	echo "example (class example, address vmip/example) as an internal VM of the core, whose launcher boots it under QEMU."; \
	echo "  export KUBECONFIG=$$kc"; \
	echo "  kubectl get vm,vd,cvi,vmip        # or: kubectl get virtualization -A"; \
	echo "  make console VM=example           # its serial console through virtualization-api (Ctrl+] leaves)"; \
	echo "  kubectl get --raw /apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/default/virtualmachines/example/console   # who holds it"; \
	echo "  kubectl patch vm example --type merge -p '{\"spec\":{\"runPolicy\":\"AlwaysOff\"}}'   # stop it"; \
	echo "What the cluster holds for it, in the core's renamed kinds:"; \
	echo "  kubectl get intvirt,pods -A"; \
	echo "  helm -n d8-virtualization status virtualization"; \
	echo "Prometheus scrapes every component through kube-rbac-proxy, following restarted Pods: $$prom"; \
	echo "  curl -s '$$prom/api/v1/query?query=d8_virtualization_virtualmachine_status_phase'"; \
	echo "  make cluster-down   # to stop it all"

.PHONY: console
console: ## Attach to a VirtualMachine's serial console through virtualization-api with d8v: make console VM=example [NS=default] (CORE=1: a core VMI through subresources.kubevirt.io).
	@test -n "$(VM)" || { echo "usage: make console VM=<name> [NS=namespace] [CORE=1]" >&2; exit 2; }
	@if [ -n "$(CORE)" ]; then go build -o bin/vm-console ./devstack/cmd/vm-console && \
	bin/vm-console --kubeconfig "$(D8V_CACHE)/stacks/$(STACK)/kubevirt.kubeconfig" -n "$(or $(NS),default)" "$(VM)"; \
	else go build -o bin/d8v ./virtualization-api/cmd/d8v && \
	bin/d8v console --kubeconfig "$(D8V_CACHE)/stacks/$(STACK)/admin.kubeconfig" -n "$(or $(NS),default)" "$(VM)"; fi

.PHONY: chart-sync
chart-sync: ## Copy the CRDs (renamed and friendly) and virt-operator's renamed RBAC rules into charts/virtualization (its test fails when stale).
	go run ./devstack/test/chart/chartsync

include hack/api.mk
include hack/crds.mk
include hack/libvirt.mk
include hack/images.mk

.PHONY: fmt-check
fmt-check:
	@bad=$$(gofmt -l $(MODULES)); if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi

.PHONY: vet
vet:
	go vet $(PKGS)

$(TOOLS_BIN)/staticcheck:
	GOBIN=$(TOOLS_BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: lint
lint: fmt-check vet $(TOOLS_BIN)/staticcheck ## gofmt, go vet and staticcheck.
	$(TOOLS_BIN)/staticcheck $(PKGS)

# The packages whose tests share the cluster with the module (they use devstack/moduletest; the
# module e2e, which installs, uninstalls and upgrades the module, runs a cluster of its own, beside
# them: most of either's time is waiting for guests and rollouts, and its VMs take the other half
# of the VM addresses, see devstack/chart-values/local.yaml), and the rest.
MODULE_E2E := github.com/d8virt/devstack/test/module
SHARED_PKGS = $(filter-out $(MODULE_E2E),$(shell go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./devstack/... | \
	awk '{for (i = 2; i <= NF; i++) if ($$i == "github.com/d8virt/devstack/moduletest") print $$1}'))
# Of the rest, the packages that start a stack or reach the suite's (those importing testenv, all of
# devstack/test/) or that need the machine to themselves (root: network namespaces, libvirtd, QEMU)
# run one at a time; the unit tests side by side (go test's default -p, which also links their
# test binaries in parallel).
ALONE_PKGS = $(filter-out $(SHARED_PKGS) $(MODULE_E2E),$(shell go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' $(PKGS) | \
	awk '$$1 ~ /^github.com\/d8virt\/devstack\/(test\/|guest$$|libvirtd$$|localnet$$|nodeagent$$)/ {print $$1; next} \
	{for (i = 2; i <= NF; i++) if ($$i == "github.com/d8virt/devstack/testenv") {print $$1; break}}'))
UNIT_PKGS = $(filter-out $(SHARED_PKGS) $(ALONE_PKGS) $(MODULE_E2E),$(shell go list $(PKGS)))

.PHONY: test
test: deps lint $(DEVCLUSTER) ## Lint, then unit and integration tests against a real control plane.
	@echo "[make test $$(date +%T)] lint done; building"
	go build -o bin/ ./devstack/cmd/e2e-cluster
	$(E2E_CLUSTER) down -record $(E2E_RECORD)
	$(DEVCLUSTER) --name $(TEST_STACK) --port-base $(TEST_PORT_BASE) down -purge
	kc=$$($(DEVCLUSTER) --name $(TEST_STACK) --port-base $(TEST_PORT_BASE) up); \
	trap '$(E2E_CLUSTER) down -record $(E2E_RECORD); $(DEVCLUSTER) --name $(TEST_STACK) --port-base $(TEST_PORT_BASE) down -purge' EXIT; \
	export D8V_TEST_KUBECONFIG="$$kc" D8V_TEST_MODULE_BIN=$(E2E_BIN); \
	$(E2E_CLUSTER) build $(E2E_BIN); \
	rc=0; stamp() { echo "[make test $$(date +%T)] $$*"; }; \
	stamp "unit tests"; go test -count=1 -timeout 30m $(UNIT_PKGS) || rc=$$?; \
	stamp "integration and e2e tests, one package at a time"; go test -p 1 -count=1 -timeout 30m $(ALONE_PKGS) || rc=$$?; \
	stamp "the module e2e on a cluster of its own, beside the shared cluster and its packages"; \
	module_log=$$(mktemp); go test -count=1 -timeout 30m $(MODULE_E2E) > $$module_log 2>&1 & module=$$!; \
	stamp "the cluster with the module the e2e packages share"; $(E2E_CLUSTER) up -record $(E2E_RECORD); \
	stamp "e2e tests on it"; D8V_TEST_MODULE=$(E2E_RECORD) go test -p 1 -count=1 -timeout 30m $(SHARED_PKGS) || rc=$$?; \
	wait $$module || rc=$$?; stamp "the module e2e ended:"; cat $$module_log; rm -f $$module_log; \
	stamp "done: exit $$rc"; exit $$rc

# Benchmarks that need no cluster; each prints its figures side by side with a baseline.
BENCH_PKGS := ./kube-api-rewriter/pkg/rewrite/ ./kube-api-rewriter/test/bench/ ./devstack/test/importer/

.PHONY: bench
bench: ## Benchmarks (rewriter vs. plain reverse proxy and encoding/json; importer vs. curl + qemu-img), with ratios.
	go test -run '^$$' -bench . -benchmem $(BENCH_PKGS)

# bench-on-cluster runs the e2e benchmark $(1) (more flags: $(2)) once, on a local cluster of two
# nodes with the module, made for it and removed after it.
define bench-on-cluster
	$(DEVCLUSTER) --name bench --port-base 9640 down -purge
	kc=$$($(DEVCLUSTER) --name bench --port-base 9640 up); \
	trap '$(DEVCLUSTER) --name bench --port-base 9640 down -purge' EXIT; \
	D8V_TEST_KUBECONFIG="$$kc" go test -run '^$$' -bench $(1) -benchtime 1x -timeout 30m -v ./devstack/test/kubevirt-core/e2e/ $(2)
endef

.PHONY: bench-vms
VMS ?= 10
bench-vms: deps $(DEVCLUSTER) ## VM start density: VMS (10) small VMs at once on two local nodes, core and friendly: p50/p95 create-to-Running, API writes, CPU and stages per start.
	$(call bench-on-cluster,BenchmarkVMStartDensity,-density-vms $(VMS))

.PHONY: bench-streams
bench-streams: deps $(DEVCLUSTER) ## Port-forward and console of a friendly VM through virtualization-api, next to the core's virt-api and a straight connection: MiB/s and the console's round trip.
	$(call bench-on-cluster,BenchmarkStreams)
