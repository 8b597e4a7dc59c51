# CRDs of kubevirt-core: the kubevirt.io originals, generated from the kubevirt.io/api types, and
# their renamed copies (internal.virtualization.deckhouse.io) that the cluster actually holds.
# Included from the root Makefile; kubevirt-core/crds/crds_test.go fails when either set is stale.

CRDS_ORIGINAL_DIR := kubevirt-core/crds/kubevirt.io
CRDS_RENAMED_DIR := crds/internal.virtualization.deckhouse.io

.PHONY: crds
crds: ## Regenerate the kubevirt.io CRDs from kubevirt.io/api and their renamed copies in crds/.
	cd kubevirt-core && go run ./hack/crdgen -out crds/kubevirt.io
	mkdir -p $(CRDS_RENAMED_DIR)
	@# Build the rewriter once instead of once per file; its rename-crds tool is the same code the
	@# sidecar uses, so the renamed CRDs match what the proxy expects.
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	go build -o "$$tmp/kube-api-rewriter" ./kube-api-rewriter/cmd/kube-api-rewriter; \
	rm -f $(CRDS_RENAMED_DIR)/*.yaml; \
	for f in $(CRDS_ORIGINAL_DIR)/*.yaml; do \
	  "$$tmp/kube-api-rewriter" rename-crds "$$f" > "$(CRDS_RENAMED_DIR)/$$(basename "$$f")"; \
	done
	$(MAKE) --no-print-directory chart-sync
