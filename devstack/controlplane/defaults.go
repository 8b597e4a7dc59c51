package controlplane

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/d8virt/devstack/cachedir"
	"github.com/d8virt/devstack/localnet"
)

// K8sVersion is the Kubernetes release the local stack runs; hack/build-k8s.sh has the same pin.
const K8sVersion = "v1.37.2"

// CacheRoot is the machine-wide cache of built binaries and stack state (cachedir.Root): D8V_CACHE,
// or $XDG_CACHE_HOME/d8-virtualization, or ~/.cache/d8-virtualization.
func CacheRoot() string { return cachedir.Root() }

// BinDir is where hack/build-k8s.sh puts the Kubernetes binaries, kubectl, helm and kube-rbac-proxy.
func BinDir() string {
	if v := os.Getenv("D8V_K8S_BIN"); v != "" {
		return v
	}
	return filepath.Join(CacheRoot(), "k8s-"+K8sVersion, "bin")
}

// DefaultConfig is the configuration of the named stack with the given port base, logging to log.
func DefaultConfig(name string, portBase int, log io.Writer) (Config, error) {
	n, err := localnet.Default()
	if err != nil {
		return Config{}, err
	}
	return Config{
		StateDir: filepath.Join(CacheRoot(), "stacks", name),
		BinDir:   BinDir(),
		PortBase: portBase,
		Net:      n,
		Log:      log,
	}, nil
}

// Binaries are what hack/build-k8s.sh builds into BinDir: the control plane, kubectl, helm, and
// kube-rbac-proxy, the stock proxy in front of every metrics port of the module.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "helm", "kube-rbac-proxy"}

// EnsureBinaries builds Binaries with hack/build-k8s.sh unless they are all there, streaming the
// build's progress to log.
func EnsureBinaries(log io.Writer) error {
	missing := false
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(BinDir(), b)); err != nil {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	script, err := buildScript()
	if err != nil {
		return err
	}
	cmd := exec.Command("bash", script)
	cmd.Stdout, cmd.Stderr = io.Discard, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", script, err)
	}
	return nil
}

// buildScript finds hack/build-k8s.sh from this source file (devstack/controlplane), which is where it lives
// in a checkout; tests always run from one.
func buildScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate hack/build-k8s.sh")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "hack", "build-k8s.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("locate build script: %w", err)
	}
	return strings.TrimSpace(script), nil
}
