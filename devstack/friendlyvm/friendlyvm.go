// Package friendlyvm sets up, for e2e tests on a cluster with the module, a friendly
// VirtualMachine that boots the tiny guest the way a user would: the guest's disk served over
// HTTP from the test machine, a ClusterVirtualImage imported from it, a VirtualDisk made from that
// image, a VirtualMachineClass and the VirtualMachine. Spec is the one builder of those
// manifests; ServeGuestFiles serves the files.
package friendlyvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/testenv"
)

// GuestFiles are the tiny guest's files (guesttest.ImportFiles: the disk, gzipped too, a NoCloud
// ISO and an HTML page) served over HTTP at URL, an address of the test machine that the nodes'
// pods reach (the local network's gateway).
type GuestFiles struct {
	URL   string
	Files map[string][]byte
}

// ServeGuestFiles serves the guest's files until the test ends.
func ServeGuestFiles(t testing.TB, ctx context.Context) GuestFiles {
	t.Helper()
	g := GuestFiles{Files: guesttest.ImportFiles(t, ctx)}
	dir := t.TempDir()
	for n, b := range g.Files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(testenv.Get(t).Net.GatewayIP().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	g.URL = "http://" + l.Addr().String()
	return g
}

// HTTPSource is an HTTP dataSource (YAML to follow `dataSource:` at two spaces' indent) for file
// with checksum (sha256).
func (g GuestFiles) HTTPSource(file, checksum string) string {
	return fmt.Sprintf("\n    type: HTTP\n    http:\n      url: %s/%s\n      checksum:\n        sha256: \"%s\"", g.URL, file, checksum)
}

// SHA256 is the hex sha256 of a served file.
func (g GuestFiles) SHA256(file string) string {
	s := sha256.Sum256(g.Files[file])
	return hex.EncodeToString(s[:])
}

// ReadWriteManyClassYAML is a StorageClass of the local provisioner, name, whose disks are
// ReadWriteMany (virtualization-controller's StorageClass annotation), so that a VM on them can
// live-migrate between nodes: a ReadWriteOnce claim pins it to its node.
func ReadWriteManyClassYAML(name string) string {
	return `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ` + name + `
  annotations: {virtualization.deckhouse.io/access-mode: ReadWriteMany}
provisioner: ` + provisioner.Name + `
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
`
}

// ImageYAML is a ClusterVirtualImage name imported from source (a dataSource, e.g. HTTPSource).
func ImageYAML(name, source string) string {
	return fmt.Sprintf("apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: ClusterVirtualImage\nmetadata: {name: %s}\nspec:\n  dataSource:%s\n", name, source)
}

// Spec is a VirtualMachine that boots the tiny guest from the VirtualDisk Disk, made from the
// ClusterVirtualImage Image, with its class; the zero values are left out of the manifests.
type Spec struct {
	Name, Namespace string
	// Class is the VirtualMachineClass; DefaultClass marks it the cluster's default, and the VM
	// then names none (the controller fills it in).
	Class        string
	DefaultClass bool
	// Disk is the VirtualDisk of DiskSize in StorageClass ("": the cluster's default), made from
	// the ClusterVirtualImage Image. With no Disk the VM boots from Image itself (a containerDisk
	// from DVCR) and there is no VirtualDisk.
	Disk, DiskSize, StorageClass, Image string
	RunPolicy                           string
	Cores                               int
	CoreFraction, Memory                string
	LiveMigrationPolicy                 string
	// TerminationGracePeriodSeconds is left out when 0.
	TerminationGracePeriodSeconds int
	// UserData is inline cloud-init user data.
	UserData string
}

// ClassYAML is the VirtualMachineClass (CPU type Host).
func (s Spec) ClassYAML() string {
	annotations := ""
	if s.DefaultClass {
		annotations = "\n  annotations:\n    virtualmachineclass.virtualization.deckhouse.io/is-default-class: \"true\""
	}
	return fmt.Sprintf("apiVersion: virtualization.deckhouse.io/v1alpha3\nkind: VirtualMachineClass\nmetadata:\n  name: %s%s\nspec:\n  cpu:\n    type: Host\n", s.Class, annotations)
}

// DiskYAML is the VirtualDisk.
func (s Spec) DiskYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualDisk\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  persistentVolumeClaim:\n    size: %s\n", s.Disk, s.Namespace, s.DiskSize)
	if s.StorageClass != "" {
		fmt.Fprintf(&b, "    storageClassName: %s\n", s.StorageClass)
	}
	fmt.Fprintf(&b, "  dataSource:\n    type: ObjectRef\n    objectRef: {kind: ClusterVirtualImage, name: %s}\n", s.Image)
	return b.String()
}

// MachineYAML is the VirtualMachine.
func (s Spec) MachineYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachine\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n", s.Name, s.Namespace)
	if !s.DefaultClass {
		fmt.Fprintf(&b, "  virtualMachineClassName: %s\n", s.Class)
	}
	fmt.Fprintf(&b, "  runPolicy: %s\n", s.RunPolicy)
	if s.LiveMigrationPolicy != "" {
		fmt.Fprintf(&b, "  liveMigrationPolicy: %s\n", s.LiveMigrationPolicy)
	}
	if s.TerminationGracePeriodSeconds != 0 {
		fmt.Fprintf(&b, "  terminationGracePeriodSeconds: %d\n", s.TerminationGracePeriodSeconds)
	}
	fmt.Fprintf(&b, "  cpu:\n    cores: %d\n    coreFraction: %s\n  memory:\n    size: %s\n", s.Cores, s.CoreFraction, s.Memory)
	if s.Disk != "" {
		fmt.Fprintf(&b, "  blockDeviceRefs:\n    - kind: VirtualDisk\n      name: %s\n", s.Disk)
	} else {
		fmt.Fprintf(&b, "  blockDeviceRefs:\n    - kind: ClusterVirtualImage\n      name: %s\n", s.Image)
	}
	if s.UserData != "" {
		fmt.Fprintf(&b, "  provisioning:\n    type: UserData\n    userData: |\n%s", indent(s.UserData, "      "))
	}
	return b.String()
}

// Manifest is the class, the disk (if any) and the machine, as one multi-document YAML.
func (s Spec) Manifest() string {
	docs := []string{s.ClassYAML()}
	if s.Disk != "" {
		docs = append(docs, s.DiskYAML())
	}
	return strings.Join(append(docs, s.MachineYAML()), "---\n")
}

func indent(text, prefix string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
