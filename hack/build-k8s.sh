#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries, etcd and kubectl for one pinned release, plus helm,
# kube-rbac-proxy (which the module puts in front of every metrics port) and distribution's registry
# (DVCR, the module's registry), from the Go module proxy into a machine-wide cache. Idempotent: a binary that is already built for
# this version is never rebuilt. Prints the bin directory as its last line.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
KUBE_RBAC_PROXY_VERSION="${KUBE_RBAC_PROXY_VERSION:-v0.19.1}"
DISTRIBUTION_VERSION="${DISTRIBUTION_VERSION:-v3.0.0}"
CACHE_ROOT="${D8V_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/d8-virtualization}"
K8S_DIR="$CACHE_ROOT/k8s-$K8S_VERSION"
BIN="$K8S_DIR/bin"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"

log() { printf '[build-k8s %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$BIN" "$K8S_DIR/src"
exec 9>"$K8S_DIR/.build.lock"
flock 9

k8s_bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
missing=()
for b in "${k8s_bins[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done

if [ "${#missing[@]}" -gt 0 ]; then
  log "building ${missing[*]} for Kubernetes $K8S_VERSION into $BIN (a cold build takes ~20 minutes on 2 cores)"
  cd "$K8S_DIR/src"
  # k8s.io/kubernetes points its staging modules at ./staging; replace them with their releases.
  mod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod"
  [ -f "$mod" ] || GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null
  {
    echo "module d8v.local/k8sbuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -Eo '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$mod" | awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >go.mod
  log "resolving modules"
  # etcd at exactly the version this Kubernetes release tests against.
  etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$mod")"
  GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$K8S_VERSION" "go.etcd.io/etcd/server/v3@$etcd_version" >&2
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  pkgs=()
  for b in "${missing[@]}"; do
    case "$b" in
      etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
    esac
  done
  log "compiling ${pkgs[*]}"
  out="$K8S_DIR/out"; rm -rf "$out"; mkdir -p "$out"
  GOFLAGS=-mod=mod CGO_ENABLED=0 go build -v -ldflags "$ldflags" -o "$out/" "${pkgs[@]}" 2>&1 |
    awk '{n++; if (n % 200 == 0) printf "[build-k8s] compiled %d packages (last: %s)\n", n, $0; fflush()}' >&2
  # go names a binary after the path element before a /vN suffix.
  [ -x "$out/server" ] && mv "$out/server" "$out/etcd"
  for b in "${missing[@]}"; do mv "$out/$b" "$BIN/$b"; done
  log "Kubernetes binaries ready"
fi

# build_tool BINARY DIR MODULE@VERSION PACKAGE LDFLAGS builds one tool in a throwaway module of its
# own (DIR/src): the proxy refuses version lists for some modules, so the pin is an exact version,
# and go get resolves the tool's own requirements (kube-rbac-proxy's k8s.io libraries, for one)
# independently of the Kubernetes release above. LDFLAGS' -X flags set what its --version prints,
# as its own Makefile does.
build_tool() {
  local binary="$1" dir="$2" module="$3" pkg="$4" ldflags="$5"
  [ -x "$BIN/$binary" ] && return 0
  log "building $binary ($module)"
  mkdir -p "$dir/src"
  (
    cd "$dir/src"
    printf 'module d8v.local/%sbuild\n\ngo 1.26\n' "${binary//-/}" >go.mod
    GOFLAGS=-mod=mod go get "$module" >&2
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -ldflags "-s -w $ldflags" -o "$BIN/$binary" "$pkg"
  )
  log "$binary ready"
}

build_tool helm "$CACHE_ROOT/helm-$HELM_VERSION" "helm.sh/helm/v3@$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
build_tool kube-rbac-proxy "$CACHE_ROOT/kube-rbac-proxy-$KUBE_RBAC_PROXY_VERSION" \
  "github.com/brancz/kube-rbac-proxy@$KUBE_RBAC_PROXY_VERSION" github.com/brancz/kube-rbac-proxy/cmd/kube-rbac-proxy \
  "-X k8s.io/component-base/version.gitVersion=$KUBE_RBAC_PROXY_VERSION -X k8s.io/component-base/version/verflag.programName=kube-rbac-proxy"
# DVCR runs distribution's own command, built with this Go (docs/dvcr.md: a current Go hashes what
# is pushed with the CPU's SHA extensions).
build_tool registry "$CACHE_ROOT/distribution-$DISTRIBUTION_VERSION" \
  "github.com/distribution/distribution/v3@$DISTRIBUTION_VERSION" github.com/distribution/distribution/v3/cmd/registry \
  "-X github.com/distribution/distribution/v3/version.version=$DISTRIBUTION_VERSION"

"$BIN/kube-apiserver" --version >&2
echo "$BIN"
