package module

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/friendlyvm"
	"github.com/d8virt/devstack/guest/guesttest"
)

// vmSpec: a default class, a VirtualDisk made from the ClusterVirtualImage module-e2e-root
// (created later by the test: until then the disk waits for its source), and a friendly VM that
// names no class, with runPolicy AlwaysOff and inline cloud-init.
var vmSpec = friendlyvm.Spec{
	Name: "module-e2e", Namespace: "default", Class: "module-e2e", DefaultClass: true,
	Disk: "module-e2e-root", DiskSize: "64Mi", Image: "module-e2e-root",
	RunPolicy: "AlwaysOff", Cores: 1, CoreFraction: "50%", Memory: "128Mi",
	UserData: "#cloud-config\nruncmd:\n- echo hello from module-e2e\n",
}

// checkVirtualMachine checks the VirtualMachine controller through the chart's
// virtualization-controller and its rewriter sidecar, with kubectl and the friendly kinds only
// (the internal VM is read back through the admin's renamed names): the default class fills the
// VM's class, a disk not ready keeps the VM Pending, IPAM's address becomes the VM's and its Pod's, the internal VM appears with the VM's spec
// once it is, AlwaysOff keeps it off, AlwaysOn boots the real guest (its console answers), a
// change of cores waits for a restart, `kubectl get vm` shows the columns, a poweroff inside the
// guest with AlwaysOn starts it again (with the new cores), with AlwaysOnUnlessStoppedManually it
// stays Stopped, a class in use outlives its deletion, and deleting the VM removes the internal VM
// and VMI.
func checkVirtualMachine(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	t.Log("virtualization-controller: a VirtualMachine becomes an internal VM and follows its run policy")
	kc := st.s.KubeconfigPath()
	manifest := filepath.Join(t.TempDir(), "vm.yaml")
	if err := os.WriteFile(manifest, []byte(vmSpec.Manifest()), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", manifest)
	defer st.kubectl(t, kc, "delete", "-f", manifest, "--ignore-not-found", "--timeout=120s")
	get := func(kind, jsonpath string) string {
		return st.kubectl(t, kc, "-n", "default", "get", kind, "-o", "jsonpath="+jsonpath)
	}
	wait := func(kind, cond string, timeout time.Duration) {
		t.Helper()
		st.kubectl(t, kc, "-n", "default", "wait", kind, "--for="+cond, "--timeout="+timeout.String())
	}

	wait("vmclass/module-e2e", "jsonpath={.status.phase}=Ready", time.Minute)
	if got := get("vmclass/module-e2e", "{.status.availableNodes}"); !strings.Contains(got, nodeName) {
		t.Errorf("class availableNodes %s", got)
	}
	wait("vm/module-e2e", "jsonpath={.spec.virtualMachineClassName}=module-e2e", time.Minute)
	wait("vm/module-e2e", "jsonpath={.status.conditions[?(@.type=='BlockDevicesReady')].status}=False", time.Minute)
	if got := get("vm/module-e2e", "{.status.phase}"); got != "Pending" {
		t.Errorf("phase with the disk not ready: %s", got)
	}
	if out := st.kubectl(t, kc, "-n", "default", "get", "internalvirtualizationvirtualmachines", "--ignore-not-found", "-o", "name"); strings.Contains(out, "module-e2e") {
		t.Errorf("an internal VM before its disk is ready: %s", out)
	}

	t.Log("the ClusterVirtualImage the disk is made from is imported over HTTP, then the disk from it")
	g := friendlyvm.ServeGuestFiles(t, ctx)
	image := friendlyvm.ImageYAML(vmSpec.Image, g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2")))
	imageFile := filepath.Join(t.TempDir(), "cvi.yaml")
	if err := os.WriteFile(imageFile, []byte(image), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", imageFile)
	defer st.kubectl(t, kc, "delete", "-f", imageFile, "--ignore-not-found", "--timeout=120s")
	wait("cvi/module-e2e-root", "jsonpath={.status.phase}=Ready", 3*time.Minute)
	wait("vd/module-e2e-root", "jsonpath={.status.phase}=Ready", 3*time.Minute)
	claim := get("vd/module-e2e-root", "{.status.target.persistentVolumeClaimName}")
	wait("vm/module-e2e", "jsonpath={.status.phase}=Stopped", time.Minute)
	internal := "internalvirtualizationvirtualmachines/module-e2e"
	checks := map[string]string{
		"{.spec.runStrategy}":                                                                   "Manual",
		"{.metadata.ownerReferences[0].kind}":                                                   "VirtualMachine",
		"{.spec.template.spec.domain.cpu.cores}":                                                "1",
		"{.spec.template.spec.domain.resources.requests.cpu}":                                   "500m",
		"{.spec.template.spec.domain.resources.limits.cpu}":                                     "1",
		"{.spec.template.spec.domain.memory.guest}":                                             "128Mi",
		"{.spec.template.spec.volumes[0].persistentVolumeClaim.claimName}":                      claim,
		"{.spec.template.spec.domain.devices.disks[0].bootOrder}":                               "1",
		"{.spec.template.spec.domain.cpu.model}":                                                "host-model",
		"{.spec.template.spec.networks[0].name}":                                                "default",
		"{.spec.template.metadata.labels.virtualization\\.deckhouse\\.io/virtual-machine-name}": "module-e2e",
	}
	for path, want := range checks {
		if got := get(internal, path); got != want {
			t.Errorf("internal VM %s = %q, want %q", path, got, want)
		}
	}
	time.Sleep(3 * time.Second)
	if out := st.kubectl(t, kc, "-n", "default", "get", "internalvirtualizationvirtualmachineinstances", "--ignore-not-found", "-o", "name"); strings.Contains(out, "module-e2e") {
		t.Errorf("AlwaysOff started the VM: %s", out)
	}

	t.Log("runPolicy AlwaysOn boots the guest")
	st.kubectl(t, kc, "-n", "default", "patch", "vm/module-e2e", "--type=merge", "-p", `{"spec":{"runPolicy":"AlwaysOn"}}`)
	wait("vm/module-e2e", "jsonpath={.status.phase}=Running", 3*time.Minute)
	if got := get("vm/module-e2e", "{.status.nodeName}"); got != nodeName {
		t.Errorf("nodeName %q", got)
	}
	// IPAM made the VM's address; the launcher Pod has it.
	addr := get("vmip/module-e2e", "{.status.address}")
	if got := get("vm/module-e2e", "{.status.ipAddress}"); addr == "" || got != addr {
		t.Errorf("status.ipAddress %q, the VirtualMachineIPAddress's %q", got, addr)
	}
	if got := get("internalvirtualizationvirtualmachineinstances/module-e2e", "{.status.interfaces[0].ipAddress}"); got != addr {
		t.Errorf("the VMI's address %q, want the VirtualMachineIPAddress's %q", got, addr)
	}
	if got := get("vm/module-e2e", "{.status.resources.cpu.coreFraction}"); got != "50%" {
		t.Errorf("resources.cpu.coreFraction %q", got)
	}
	out := st.kubectl(t, kc, "-n", "default", "get", "vm", "module-e2e")
	for _, col := range []string{"PHASE", "CORES", "COREFRACTION", "MEMORY", "NEED RESTART", "AGENT", "NODE", "IPADDRESS", "Running", nodeName} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get vm has no %q:\n%s", col, out)
		}
	}
	con := openConsole(t, ctx, st.kubevirt, "module-e2e")
	if _, err := con.WaitFor(regexp.MustCompile(`hello from module-e2e`), 2*time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	_ = con.Close()
	checkVMStatus(t, st, kc)
	checkDiscoveryClass(t, st, kc)
	checkVirtualizationAPI(t, ctx, st, "module-e2e")
	checkVMMetrics(t, ctx, st, "module-e2e", "module-e2e-root")
	checkVMOPMetric(t, ctx, st, "module-e2e")
	checkVirtualMachineBlockDeviceAttachment(t, ctx, st, "module-e2e", "module-e2e-root")
	checkImageAttachment(t, ctx, st, "module-e2e", "module-e2e-root", g.HTTPSource("cidata.iso", g.SHA256("cidata.iso")))

	t.Log("a change of cores waits for a restart")
	st.kubectl(t, kc, "-n", "default", "patch", "vm/module-e2e", "--type=merge", "-p", `{"spec":{"cpu":{"cores":2}}}`)
	wait("vm/module-e2e", "jsonpath={.status.conditions[?(@.type=='AwaitingRestartToApplyConfiguration')].status}=True", time.Minute)
	if got := get("vm/module-e2e", "{.status.restartAwaitingChanges[0].path}"); got != "/cpu/cores" {
		t.Errorf("restartAwaitingChanges path %q", got)
	}
	if out := st.kubectl(t, kc, "get", "events", "-n", "default", "--field-selector", "involvedObject.name=module-e2e", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(out, "VirtualMachinePhaseChanged") {
		t.Errorf("events of the VM: %q", out)
	}

	t.Log("AlwaysOn: a poweroff inside the guest starts it again, with the new cores")
	vmi := "internalvirtualizationvirtualmachineinstances/module-e2e"
	uid := get(vmi, "{.metadata.uid}")
	powerOff(t, func() *guesttest.Console { return openConsole(t, ctx, st.kubevirt, "module-e2e") })
	deadline := time.Now().Add(3 * time.Minute)
	for {
		now := st.kubectl(t, kc, "-n", "default", "get", vmi, "--ignore-not-found", "-o", "jsonpath={.metadata.uid} {.status.phase}")
		if f := strings.Fields(now); len(f) == 2 && f[0] != uid && f[1] == "Running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new running VMI after the poweroff: %q (was %s)", now, uid)
		}
		time.Sleep(2 * time.Second)
	}
	wait("vm/module-e2e", "jsonpath={.status.conditions[?(@.type=='AwaitingRestartToApplyConfiguration')].status}=False", time.Minute)
	if got := get("vm/module-e2e", "{.status.resources.cpu.cores}"); got != "2" {
		t.Errorf("cores after the restart %q", got)
	}

	t.Log("AlwaysOnUnlessStoppedManually: a poweroff inside the guest leaves it Stopped")
	st.kubectl(t, kc, "-n", "default", "patch", "vm/module-e2e", "--type=merge", "-p", `{"spec":{"runPolicy":"AlwaysOnUnlessStoppedManually"}}`)
	powerOff(t, func() *guesttest.Console { return openConsole(t, ctx, st.kubevirt, "module-e2e") })
	wait("vm/module-e2e", "jsonpath={.status.phase}=Stopped", 2*time.Minute)
	time.Sleep(5 * time.Second)
	if got := get("vm/module-e2e", "{.status.phase}"); got != "Stopped" {
		t.Errorf("phase a while after the poweroff: %s", got)
	}

	t.Log("a class in use outlives its deletion; deleting the VM removes the internal VM and VMI")
	st.kubectl(t, kc, "delete", "vmclass/module-e2e", "--wait=false")
	wait("vmclass/module-e2e", "jsonpath={.status.phase}=Terminating", time.Minute)
	st.kubectl(t, kc, "-n", "default", "delete", "vm/module-e2e", "--timeout=2m")
	for _, kind := range []string{"internalvirtualizationvirtualmachines", "internalvirtualizationvirtualmachineinstances"} {
		if out := st.kubectl(t, kc, "-n", "default", "get", kind, "--ignore-not-found", "-o", "name"); strings.Contains(out, "module-e2e") {
			t.Errorf("%s left after the VM: %s", kind, out)
		}
	}
	st.kubectl(t, kc, "wait", "vmclass/module-e2e", "--for=delete", "--timeout=1m")
}

// powerOff opens the guest's console, waits for its shell to answer, types poweroff, and waits
// for the guest's shutdown mark before it closes the console. A console that closes before the
// shell answered (seen once right after a new VMI came up) is opened again.
func powerOff(t *testing.T, open func() *guesttest.Console) {
	t.Helper()
	con := open()
	defer func() { _ = con.Close() }()
	answer := regexp.MustCompile(`answer-42`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := con.Write("echo answer-$((6*7))\n")
		if err == nil {
			if _, err = con.WaitFor(answer, 5*time.Second); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest's shell does not answer: %v\nconsole so far:\n%s", err, con)
		}
		if strings.Contains(err.Error(), "close") {
			t.Logf("the console closed (%v): opening it again", err)
			_ = con.Close()
			con = open()
		}
	}
	if err := con.Write("poweroff\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`D8V-GUEST-SHUTDOWN`), time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
}
