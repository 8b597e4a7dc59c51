# The friendly API (api/): deep copies, CRDs (crds/virtualization.deckhouse.io) and the typed client
# generated from its Go types by hack/generate-api.sh, which builds controller-gen and
# code-generator at pinned versions into $(TOOLS_BIN). Included from the root Makefile; the api
# module's staleness test fails when the checked-in files differ from what the script generates.

.PHONY: generate
generate: ## Regenerate the api/ module's deep copies, typed client and CRDs, then the chart's copies.
	hack/generate-api.sh
	$(MAKE) --no-print-directory chart-sync
