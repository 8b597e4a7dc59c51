package module

import (
	"context"
	"fmt"
	"github.com/d8virt/devstack/friendlyvm"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// cdiskManifest: a class of its own and a friendly VM whose only disk is the ClusterVirtualImage
// cdisk-e2e-root, with no VirtualDisk in between; and a VirtualImage kept on a claim, made from
// that image, and a VM whose only disk it is.
var cdiskManifest = `apiVersion: virtualization.deckhouse.io/v1alpha3
kind: VirtualMachineClass
metadata:
  name: cdisk-e2e
spec:
  cpu:
    type: Host
---
` + fmt.Sprintf(cdiskVM, "cdisk-e2e", "ClusterVirtualImage", "cdisk-e2e-root") + `---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualImage
metadata:
  name: cdisk-e2e-claim
  namespace: default
spec:
  storage: PersistentVolumeClaim
  dataSource:
    type: ObjectRef
    objectRef: {kind: ClusterVirtualImage, name: cdisk-e2e-root}
---
` + fmt.Sprintf(cdiskVM, "cdisk-e2e-claim", "VirtualImage", "cdisk-e2e-claim")

// cdiskVM is a VM %[1]s of the class cdisk-e2e whose only disk is the image %[3]s of kind %[2]s;
// its guest says hello with its name.
const cdiskVM = `apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachine
metadata:
  name: %[1]s
  namespace: default
spec:
  virtualMachineClassName: cdisk-e2e
  runPolicy: AlwaysOn
  cpu:
    cores: 1
    coreFraction: 50%%
  memory:
    size: 128Mi
  blockDeviceRefs:
    - kind: %[2]s
      name: %[3]s
  provisioning:
    type: UserData
    userData: |
      #cloud-config
      runcmd:
      - echo hello from %[1]s
`

// checkVirtualMachineFromImage boots a friendly VM straight from a ClusterVirtualImage: the
// image, imported over HTTP into DVCR, becomes the internal VM's containerDisk of the image's
// registryURL, the node pulls it from DVCR (with the CA and credentials the module's nodes get),
// and the guest answers on its console. Beside it, a VM boots from a VirtualImage kept on a
// claim: the claim, read-only, is the internal VM's read-only disk. Everything it makes is gone at
// the end.
func checkVirtualMachineFromImage(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	t.Log("a VirtualMachine boots directly from a ClusterVirtualImage, a containerDisk from DVCR, another from a VirtualImage on a claim")
	kc := st.s.KubeconfigPath()
	g := friendlyvm.ServeGuestFiles(t, ctx)
	files := filepath.Join(t.TempDir(), "cdisk.yaml")
	image := fmt.Sprintf("apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: ClusterVirtualImage\nmetadata: {name: cdisk-e2e-root}\nspec:\n  dataSource:%s\n---\n",
		g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2")))
	if err := os.WriteFile(files, []byte(image+cdiskManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", files)
	defer st.kubectl(t, kc, "delete", "-f", files, "--ignore-not-found", "--timeout=2m")
	get := func(kind, jsonpath string) string {
		return st.kubectl(t, kc, "-n", "default", "get", kind, "-o", "jsonpath="+jsonpath)
	}
	st.kubectl(t, kc, "wait", "cvi/cdisk-e2e-root", "--for=jsonpath={.status.phase}=Ready", "--timeout=3m")
	st.kubectl(t, kc, "-n", "default", "wait", "vm/cdisk-e2e", "--for=jsonpath={.status.phase}=Running", "--timeout=4m")
	url := get("cvi/cdisk-e2e-root", "{.status.target.registryURL}")
	internal := "internalvirtualizationvirtualmachines/cdisk-e2e"
	if got := get(internal, "{.spec.template.spec.volumes[0].containerDisk.image}"); url == "" || got != url {
		t.Errorf("internal VM's containerDisk %q, want the image's registryURL %q", got, url)
	}
	pod := st.kubectl(t, kc, "-n", "default", "get", "pods", "-l", "vm.kubevirt.internal.virtualization.deckhouse.io/name=cdisk-e2e",
		"-o", `jsonpath={.items[0].status.containerStatuses[?(@.name=="volumecvi-cdisk-e2e-root")].image}`)
	if pod != url {
		t.Errorf("the launcher Pod's containerDisk container runs %q, want %q", pod, url)
	}
	con := openConsole(t, ctx, st.kubevirt, "cdisk-e2e")
	if _, err := con.WaitFor(regexp.MustCompile(`hello from cdisk-e2e\b`), 2*time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	_ = con.Close()

	st.kubectl(t, kc, "-n", "default", "wait", "vi/cdisk-e2e-claim", "--for=jsonpath={.status.phase}=Ready", "--timeout=3m")
	st.kubectl(t, kc, "-n", "default", "wait", "vm/cdisk-e2e-claim", "--for=jsonpath={.status.phase}=Running", "--timeout=4m")
	claim := get("vi/cdisk-e2e-claim", "{.status.target.persistentVolumeClaimName}")
	internal = "internalvirtualizationvirtualmachines/cdisk-e2e-claim"
	spec := "{.spec.template.spec.volumes[0].persistentVolumeClaim.claimName} {.spec.template.spec.volumes[0].persistentVolumeClaim.readOnly} {.spec.template.spec.domain.devices.disks[0].disk.readonly}"
	if got, want := get(internal, spec), claim+" true true"; claim == "" || got != want {
		t.Errorf("internal VM's volume and disk: %q, want %q (the image's claim, read-only)", got, want)
	}
	con = openConsole(t, ctx, st.kubevirt, "cdisk-e2e-claim")
	if _, err := con.WaitFor(regexp.MustCompile(`hello from cdisk-e2e-claim`), 2*time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	_ = con.Close()
}
