#!/usr/bin/env bash
# Regenerates what the api/ module generates from its types: deep copies (controller-gen object),
# the CRDs in crds/virtualization.deckhouse.io (controller-gen crd), and the typed clientset,
# listers and informers under api/client (k8s.io/code-generator). `make generate` runs it on the
# repository; api's staleness test runs it on a copy and compares.
#
# Usage: hack/generate-api.sh [ROOT]    ROOT is a tree with api/ and crds/ (default: this repository).
set -euo pipefail

CONTROLLER_TOOLS_VERSION=v0.23.0
CODE_GENERATOR_VERSION=v0.37.2

root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tools=${D8V_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/d8-virtualization}/tools/bin
mkdir -p "$tools"

# tool NAME MODULE_PATH VERSION: the path of NAME built at VERSION into the tools directory, named
# with its version so that a version bump rebuilds it; built once (a rename makes it atomic for
# parallel runs).
tool() {
	local bin=$tools/$1-$3
	if [ ! -x "$bin" ]; then
		local tmp
		tmp=$(mktemp -d)
		(cd "$tmp" && GOWORK=off GOBIN="$tmp" go install "$2@$3")
		mv "$tmp/$1" "$bin"
		rm -rf "$tmp"
	fi
	echo "$bin"
}
controller_gen=$(tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_TOOLS_VERSION")
client_gen=$(tool client-gen k8s.io/code-generator/cmd/client-gen "$CODE_GENERATOR_VERSION")
lister_gen=$(tool lister-gen k8s.io/code-generator/cmd/lister-gen "$CODE_GENERATOR_VERSION")
informer_gen=$(tool informer-gen k8s.io/code-generator/cmd/informer-gen "$CODE_GENERATOR_VERSION")

module=github.com/d8virt/api
apis=(core/v1alpha2 core/v1alpha3)
crds=$root/crds/virtualization.deckhouse.io
header=$root/api/hack/boilerplate.go.txt

cd "$root/api"
export GOWORK=off
# Start from nothing, so a removed type leaves no file behind.
rm -rf client/clientset client/listers client/informers "$crds"
find core -name zz_generated.deepcopy.go -delete

paths=$(printf -- 'paths=./%s ' "${apis[@]}")
# shellcheck disable=SC2086
"$controller_gen" object:headerFile="$header" $paths
# shellcheck disable=SC2086
"$controller_gen" crd $paths output:crd:dir="$crds"

inputs=$(printf -- "$module/%s " "${apis[@]}")
# shellcheck disable=SC2086
"$client_gen" --go-header-file "$header" --clientset-name versioned --input-base "" \
	$(printf -- '--input %s ' $inputs) \
	--output-pkg "$module/client/clientset" --output-dir client/clientset
# shellcheck disable=SC2086
"$lister_gen" --go-header-file "$header" --output-pkg "$module/client/listers" --output-dir client/listers $inputs
# shellcheck disable=SC2086
"$informer_gen" --go-header-file "$header" \
	--versioned-clientset-package "$module/client/clientset/versioned" \
	--listers-package "$module/client/listers" \
	--output-pkg "$module/client/informers" --output-dir client/informers $inputs
