package vmop

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
	"github.com/d8virt/devstack/friendlyvm"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/console"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmip"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmop"
)

const (
	ns       = "vmop-e2e"
	vmName   = "worker"
	tcpPort  = 7000
	tcpHello = "ping-42"
)

// rwxClass is a StorageClass of the local provisioner whose disks are ReadWriteMany, so that the
// machine can live-migrate between the two nodes.
const rwxClass = "vmop-e2e-rwx"

// userData keeps printing a marker, so that a console opened at any time sees the guest is up,
// and serves TCP port 7000 with busybox nc: each connection's first line comes back as
// "guest <hostname> got [<line>]".
const userData = `#!/bin/sh
cat >/run/tcp-answer.sh <<'EOS'
#!/bin/sh
read line
echo "guest $(hostname) got [$line]"
EOS
chmod +x /run/tcp-answer.sh
nc -ll -p 7000 -e /run/tcp-answer.sh &
(while true; do echo "vmop-marker from $(hostname)"; sleep 2; done) &
`

// vmSpec is the machine the operations act on: runPolicy Manual, so it starts and stops only by
// the operations.
var vmSpec = friendlyvm.Spec{
	Name: vmName, Namespace: ns, Class: "vmop-e2e",
	Disk: "root", DiskSize: "64Mi", StorageClass: rwxClass, Image: "vmop-e2e-root",
	RunPolicy: string(v1alpha2.ManualPolicy), Cores: 1, CoreFraction: "100%", Memory: "128Mi",
	TerminationGracePeriodSeconds: 30, UserData: userData,
}

// TestOperations drives one friendly VirtualMachine through the operations the chart's
// controller carries out. Refusals and AddressProtection boot no VM (they need no lock);
// OnARealGuest boots the guest. Every operation's phases, conditions and events are checked on
// the way, and the duration of each that changes the guest is logged.
func TestOperations(t *testing.T) {
	c := startCluster(t, "vmop-a", "vmop-b")
	ctx := longContext(t)
	var took durations
	defer func() { t.Logf("operation durations on the tiny guest (TCG):\n%s", strings.Join(took, "\n")) }()

	c.kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { c.kubectl(t, "delete", "namespace", ns, "--timeout=3m") })
	c.apply(t, "storageclass", friendlyvm.ReadWriteManyClassYAML(rwxClass))
	t.Cleanup(func() { c.kubectl(t, "delete", "storageclass", rwxClass, "--ignore-not-found") })
	g := friendlyvm.ServeGuestFiles(t, ctx)
	c.apply(t, "image", friendlyvm.ImageYAML(vmSpec.Image, g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2"))))
	c.apply(t, "vm", vmSpec.Manifest())
	c.kubectl(t, "wait", "cvi/"+vmSpec.Image, "--for=jsonpath={.status.phase}=Ready", "--timeout=3m")
	c.kubectl(t, "-n", ns, "wait", "vd/"+vmSpec.Disk, "--for=jsonpath={.status.phase}=Ready", "--timeout=3m")
	c.kubectl(t, "-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Stopped", "--timeout=2m")

	t.Run("Refusals", func(t *testing.T) { checkRefusals(t, c, ctx) })
	t.Run("OnARealGuest", func(t *testing.T) { checkOnARealGuest(t, c, &took) })
	t.Run("AddressProtection", func(t *testing.T) { checkAddressProtection(t, c) })
}

// checkRefusals: on the stopped machine a Migrate and a Stop are refused for its phase, the spec
// of an operation cannot change, and with runPolicy AlwaysOff a Start is refused for the policy.
func checkRefusals(t *testing.T, c *cluster, ctx context.Context) {
	op := runOp(t, c, "migrate-stopped", v1alpha2.VMOPTypeMigrate, false, time.Minute)
	expectFailed(t, c, op, vmopcondition.ReasonNotApplicableForVMPhase, "Operation type Migrate is not applicable for VirtualMachine in phase Stopped")
	stop := runOp(t, c, "stop-stopped", v1alpha2.VMOPTypeStop, false, time.Minute)
	expectFailed(t, c, stop, vmopcondition.ReasonNotApplicableForVMPhase, "Operation type Stop is not applicable for VirtualMachine in phase Stopped")
	if out := c.kubectl(t, "-n", ns, "get", "vmop", "stop-stopped"); !strings.Contains(out, "PHASE") || !strings.Contains(out, "Failed") || !strings.Contains(out, vmName) {
		t.Errorf("kubectl get vmop:\n%s", out)
	}

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"type":"Start"}}`))
	if err := c.admin.Patch(ctx, stop, patch); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing spec.type: %v, want the immutability denial", err)
	}

	setMachineSpec(t, c, `{"spec":{"runPolicy":"AlwaysOff"}}`, func(vm *v1alpha2.VirtualMachine) bool { return vm.Spec.RunPolicy == v1alpha2.AlwaysOffPolicy })
	off := runOp(t, c, "start-always-off", v1alpha2.VMOPTypeStart, false, time.Minute)
	expectFailed(t, c, off, vmopcondition.ReasonNotApplicableForRunPolicy, "Operation type Start is not applicable for VirtualMachine with runPolicy AlwaysOff")
	setMachineSpec(t, c, `{"spec":{"runPolicy":"Manual"}}`, func(vm *v1alpha2.VirtualMachine) bool { return vm.Spec.RunPolicy == v1alpha2.ManualPolicy })
}

// setMachineSpec patches the machine and waits until the apiserver shows the change.
func setMachineSpec(t *testing.T, c *cluster, patch string, applied func(*v1alpha2.VirtualMachine) bool) {
	t.Helper()
	c.kubectl(t, "-n", ns, "patch", "vm/"+vmName, "--type=merge", "-p", patch)
	eventually(t, 30*time.Second, "the machine patched with "+patch, func(ctx context.Context) error {
		vm := &v1alpha2.VirtualMachine{}
		if err := c.admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName}, vm); err != nil {
			return err
		}
		if !applied(vm) {
			return fmt.Errorf("spec %+v", vm.Spec)
		}
		return nil
	})
}

// checkOnARealGuest: Start boots the guest, a second Start is refused for the phase, a Pod on
// the other node talks TCP to the guest at its VirtualMachineIPAddress, a Migrate and an Evict
// move the guest between the nodes (checkMigrations), a Migrate is refused for
// liveMigrationPolicy Never, Restart boots the guest again (a new boot ID), a graceful Stop
// shuts it down and a forced one kills it, and a Stop supersedes a Start still booting.
func checkOnARealGuest(t *testing.T, c *cluster, took *durations) {
	t.Log("Start boots the guest")
	start := runOp(t, c, "start", v1alpha2.VMOPTypeStart, false, 5*time.Minute)
	expectPhase(t, start, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	expectSignalSent(t, start)
	took.add("Start", finishedIn(start))
	c.kubectl(t, "-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Running", "--timeout=1m")
	vmi := runningVMI(t, c)
	checkVersions(t, c)
	con := guestConsole(t, c, vmi)
	boot := guestValue(t, con, "boot", bootIDScript)

	t.Log("Start of the running machine fails with its reason")
	again := runOp(t, c, "start-again", v1alpha2.VMOPTypeStart, false, time.Minute)
	expectFailed(t, c, again, vmopcondition.ReasonNotApplicableForVMPhase, "Operation type Start is not applicable for VirtualMachine in phase Running")

	checkTCPFromAnotherNode(t, c, vmi, "tcp-client")
	vmi = checkMigrations(t, c, took, vmi, boot)

	t.Log("Migrate of a machine with liveMigrationPolicy Never fails for the policy")
	setMachineSpec(t, c, `{"spec":{"liveMigrationPolicy":"Never"}}`, func(vm *v1alpha2.VirtualMachine) bool {
		return vm.Spec.LiveMigrationPolicy == v1alpha2.NeverMigrationPolicy
	})
	never := runOp(t, c, "migrate-never", v1alpha2.VMOPTypeMigrate, false, time.Minute)
	expectFailed(t, c, never, vmopcondition.ReasonNotApplicableForLiveMigrationPolicy, "Operation type Migrate is not applicable for VirtualMachine with liveMigrationPolicy Never")

	t.Log("Restart boots the guest again")
	restart := runOp(t, c, "restart", v1alpha2.VMOPTypeRestart, false, 5*time.Minute)
	expectPhase(t, restart, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	took.add("Restart", finishedIn(restart))
	old := vmi.UID
	vmi = runningVMI(t, c)
	if vmi.UID == old {
		t.Error("Restart completed with the old VMI")
	}
	con = guestConsole(t, c, vmi)
	if got := guestValue(t, con, "boot", bootIDScript); got == boot {
		t.Errorf("boot ID %s unchanged after Restart", got)
	}

	t.Log("a graceful Stop shuts the guest down")
	stop := runOp(t, c, "stop", v1alpha2.VMOPTypeStop, false, 3*time.Minute)
	expectPhase(t, stop, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	took.add("Stop", finishedIn(stop))
	expectNoQEMU(t, vmi)
	if _, err := con.WaitFor(regexp.MustCompile(`D8V-GUEST-SHUTDOWN`), 10*time.Second); err != nil {
		t.Errorf("no shutdown on the console of a graceful Stop: %v", err)
	}
	c.kubectl(t, "-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Stopped", "--timeout=1m")

	t.Log("a forced Stop kills it")
	start2 := runOp(t, c, "start-2", v1alpha2.VMOPTypeStart, false, 5*time.Minute)
	expectPhase(t, start2, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	took.add("Start", finishedIn(start2))
	vmi = runningVMI(t, c)
	kill := runOp(t, c, "kill", v1alpha2.VMOPTypeStop, true, 2*time.Minute)
	expectPhase(t, kill, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	took.add("Stop force", finishedIn(kill))
	expectNoQEMU(t, vmi)

	t.Log("a Stop supersedes the Start that is still booting the guest")
	c.kubectl(t, "-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Stopped", "--timeout=1m")
	boot3 := createOp(t, c, "start-3", v1alpha2.VMOPTypeStart, false)
	c.kubectl(t, "-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Starting", "--timeout=2m")
	halt := waitOp(t, c, createOp(t, c, "halt", v1alpha2.VMOPTypeStop, false), 3*time.Minute)
	expectPhase(t, halt, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	superseded := waitOp(t, c, boot3, time.Minute)
	expectPhase(t, superseded, v1alpha2.VMOPPhaseSuperseded, vmopcondition.ReasonSuperseded)
	if msg := completed(superseded).Message; msg != "Superseded by halt with type Stop" {
		t.Errorf("message %q", msg)
	}
	eventually(t, time.Minute, "no VMI left", func(ctx context.Context) error {
		err := c.kubevirt.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName}, &kubevirtv1.VirtualMachineInstance{})
		if err == nil {
			return fmt.Errorf("the VMI is still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// checkMigrations moves the running guest to the other node with a Migrate, and back with an
// Evict: each completes, the same VMI runs on the other node with the same boot ID (the guest
// was not restarted), and a Pod on the node it left reaches it at its VirtualMachineIPAddress
// (the target Pod shared the address and took it over once the source Pod was gone). It returns
// the VMI as it runs in the end.
func checkMigrations(t *testing.T, c *cluster, took *durations, vmi *kubevirtv1.VirtualMachineInstance, boot string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	for i, typ := range []v1alpha2.VMOPType{v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict} {
		from := vmi.Status.NodeName
		t.Logf("%s moves the guest off %s", typ, from)
		op := runOp(t, c, strings.ToLower(string(typ)), typ, false, 5*time.Minute)
		expectPhase(t, op, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
		if op.Status.Progress != "100%" {
			t.Errorf("%s progress %q", typ, op.Status.Progress)
		}
		took.add(string(typ), finishedIn(op))
		var moved *kubevirtv1.VirtualMachineInstance
		eventually(t, time.Minute, "the VMI on the other node", func(ctx context.Context) error {
			moved = &kubevirtv1.VirtualMachineInstance{}
			if err := c.kubevirt.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName}, moved); err != nil {
				return err
			}
			if moved.Status.NodeName == from || moved.Status.Phase != kubevirtv1.Running {
				return fmt.Errorf("on %s, phase %s", moved.Status.NodeName, moved.Status.Phase)
			}
			return nil
		})
		if moved.UID != vmi.UID {
			t.Errorf("%s made a new VMI (%s, was %s)", typ, moved.UID, vmi.UID)
		}
		c.kubectl(t, "-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.nodeName}="+moved.Status.NodeName, "--timeout=1m")
		con := guestConsole(t, c, moved)
		if got := guestValue(t, con, "boot", bootIDScript); got != boot {
			t.Errorf("boot ID %s after %s, was %s: the guest restarted", got, typ, boot)
		}
		_ = con.Close()
		checkTCPFromAnotherNode(t, c, moved, fmt.Sprintf("tcp-client-%d", i+1))
		vmi = moved
	}
	return vmi
}

// checkVersions: the running machine's status.versions name the QEMU and libvirt of this host,
// which the launcher runs the guest with.
func checkVersions(t *testing.T, c *cluster) {
	t.Helper()
	host := func(cmd ...string) string {
		out, err := exec.Command(cmd[0], cmd[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return string(out)
	}
	qemu, libvirt := host("qemu-system-x86_64", "--version"), host("libvirtd", "--version")
	eventually(t, 30*time.Second, "status.versions", func(ctx context.Context) error {
		vm := &v1alpha2.VirtualMachine{}
		if err := c.admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName}, vm); err != nil {
			return err
		}
		v := vm.Status.Versions
		if v.Qemu == "" || v.Libvirt == "" || !strings.Contains(qemu, "version "+v.Qemu+" ") || !strings.HasSuffix(strings.TrimSpace(libvirt), " "+v.Libvirt) {
			return fmt.Errorf("status.versions %+v, the host's: %q, %q", v, qemu, libvirt)
		}
		t.Logf("status.versions: QEMU %s, libvirt %s", v.Qemu, v.Libvirt)
		return nil
	})
}

// checkTCPFromAnotherNode runs a Pod (name) on the node the guest does not run on; it connects to
// the VirtualMachineIPAddress's address, port 7000, and the guest's answer comes back in its log.
func checkTCPFromAnotherNode(t *testing.T, c *cluster, vmi *kubevirtv1.VirtualMachineInstance, name string) {
	t.Helper()
	addr := c.kubectl(t, "-n", ns, "get", "vmip", vmName, "-o", "jsonpath={.status.address}")
	if got := c.kubectl(t, "-n", ns, "get", "vm", vmName, "-o", "jsonpath={.status.ipAddress}"); addr == "" || got != addr {
		t.Fatalf("the VM's status.ipAddress %q, its VirtualMachineIPAddress's %q", got, addr)
	}
	other := c.nodes[0]
	if other == vmi.Status.NodeName {
		other = c.nodes[1]
	}
	t.Logf("a Pod on %s connects to the guest on %s at %s:%d", other, vmi.Status.NodeName, addr, tcpPort)
	// The guest's listener starts with its user data; until then the connection is refused.
	script := fmt.Sprintf(`for i in $(seq 60); do out=$(echo %s | /bin/busybox nc -w 5 %s %d) && [ -n "$out" ] && { echo "$out"; exit 0; }; sleep 2; done; exit 1`, tcpHello, addr, tcpPort)
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: %s}
  containers:
  - name: nc
    image: busybox
    command: ["/bin/busybox", "sh", "-c", %q]
`, name, ns, other, script)
	c.apply(t, name, pod)
	began := time.Now()
	c.kubectl(t, "-n", ns, "wait", "pod/"+name, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=3m")
	out := c.kubectl(t, "-n", ns, "logs", name)
	if want := "got [" + tcpHello + "]"; !strings.Contains(out, "guest ") || !strings.Contains(out, want) {
		t.Errorf("the guest's answer %q, want %q", out, want)
	}
	t.Logf("the guest answered in %s: %s", time.Since(began).Round(100*time.Millisecond), strings.TrimSpace(out))
}

// checkAddressProtection deletes the machine's address while the machine uses it: it waits,
// protected, its Attached condition saying so, and keeps its lease; deleting the machine lets it
// go, and its lease is released.
func checkAddressProtection(t *testing.T, c *cluster) {
	t.Helper()
	t.Log("the machine's VirtualMachineIPAddress is protected while the machine uses it")
	addr := c.kubectl(t, "-n", ns, "get", "vmip", vmName, "-o", "jsonpath={.status.address}")
	lease := "ip-" + strings.ReplaceAll(addr, ".", "-")
	if f := c.kubectl(t, "-n", ns, "get", "vmip", vmName, "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(f, vmip.FinalizerProtection) {
		t.Fatalf("finalizers of the address in use: %s", f)
	}
	c.kubectl(t, "-n", ns, "delete", "vmip", vmName, "--wait=false")
	want := "The virtual machine " + vmName + " uses the address: its deletion waits until no virtual machine uses it"
	eventually(t, time.Minute, "the address says its deletion waits", func(ctx context.Context) error {
		v := &v1alpha2.VirtualMachineIPAddress{}
		if err := c.admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName}, v); err != nil {
			return err
		}
		a := meta.FindStatusCondition(v.Status.Conditions, "Attached")
		if v.DeletionTimestamp == nil || v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseAttached || a == nil || a.Message != want {
			return fmt.Errorf("deletionTimestamp %v, phase %s, Attached %+v", v.DeletionTimestamp, v.Status.Phase, a)
		}
		return nil
	})
	if got := c.kubectl(t, "get", "vmipl", lease, "-o", "jsonpath={.status.phase}"); got != "Bound" {
		t.Errorf("its lease %s is %s while the deletion waits", lease, got)
	}
	c.kubectl(t, "-n", ns, "delete", "vm", vmName, "--timeout=2m")
	c.kubectl(t, "-n", ns, "wait", "vmip/"+vmName, "--for=delete", "--timeout=1m")
	c.kubectl(t, "wait", "vmipl/"+lease, "--for=jsonpath={.status.phase}=Released", "--timeout=1m")
	// Released leases are kept for the retention period; this test's goes now.
	c.kubectl(t, "delete", "vmipl", lease, "--ignore-not-found")
}

// runOp creates an operation and waits until it finishes.
func runOp(t *testing.T, c *cluster, name string, typ v1alpha2.VMOPType, force bool, timeout time.Duration) *v1alpha2.VirtualMachineOperation {
	t.Helper()
	return waitOp(t, c, createOp(t, c, name, typ, force), timeout)
}

// createOp creates an operation on the machine; it is deleted when the test ends.
func createOp(t *testing.T, c *cluster, name string, typ v1alpha2.VMOPType, force bool) *v1alpha2.VirtualMachineOperation {
	t.Helper()
	op := &v1alpha2.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha2.VirtualMachineOperationSpec{Type: typ, VirtualMachineName: vmName},
	}
	if force {
		op.Spec.Force = ptr.To(true)
	}
	if err := c.admin.Create(testenv.Context(t), op); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.admin.Delete(context.Background(), op); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	return op
}

// waitOp waits until the operation finishes, logging the phases (with the Completed reason and
// the progress) it went through as a user watching it sees them.
func waitOp(t *testing.T, c *cluster, op *v1alpha2.VirtualMachineOperation, timeout time.Duration) *v1alpha2.VirtualMachineOperation {
	t.Helper()
	name, typ := op.Name, op.Spec.Type
	var seen []string
	eventually(t, timeout, name+" finished", func(ctx context.Context) error {
		if err := c.admin.Get(ctx, client.ObjectKeyFromObject(op), op); err != nil {
			return err
		}
		step := string(op.Status.Phase)
		if cond := completed(op); cond != nil {
			step += "/" + cond.Reason
		}
		if op.Status.Progress != "" {
			step += " " + op.Status.Progress
		}
		if n := len(seen); step != "" && (n == 0 || seen[n-1] != step) {
			seen = append(seen, step)
		}
		if !vmop.IsFinished(op) {
			return fmt.Errorf("phase %s", step)
		}
		return nil
	})
	t.Logf("%s (%s): %s in %s", name, typ, strings.Join(seen, " -> "), finishedIn(op))
	return op
}

// finishedIn is how long the operation took: from its creation to its Completed condition's
// last transition (both the apiserver's and the controller's clocks, in whole seconds).
func finishedIn(op *v1alpha2.VirtualMachineOperation) time.Duration {
	c := completed(op)
	if c == nil {
		return 0
	}
	return c.LastTransitionTime.Sub(op.CreationTimestamp.Time)
}

func completed(op *v1alpha2.VirtualMachineOperation) *metav1.Condition {
	return meta.FindStatusCondition(op.Status.Conditions, string(vmopcondition.TypeCompleted))
}

func expectPhase(t *testing.T, op *v1alpha2.VirtualMachineOperation, phase v1alpha2.VMOPPhase, reason vmopcondition.ReasonCompleted) {
	t.Helper()
	c := completed(op)
	if op.Status.Phase != phase || c == nil || c.Reason != string(reason) {
		t.Fatalf("%s: phase %s, Completed %+v; want %s with %s", op.Name, op.Status.Phase, c, phase, reason)
	}
}

func expectSignalSent(t *testing.T, op *v1alpha2.VirtualMachineOperation) {
	t.Helper()
	s := meta.FindStatusCondition(op.Status.Conditions, string(vmopcondition.TypeSignalSent))
	if s == nil || s.Status != metav1.ConditionTrue || s.Reason != string(vmopcondition.ReasonSignalSentSuccess) {
		t.Errorf("%s: SignalSent %+v", op.Name, s)
	}
}

// expectFailed checks a refused operation: Failed with reason and message, no signal sent, and a
// Warning event.
func expectFailed(t *testing.T, c *cluster, op *v1alpha2.VirtualMachineOperation, reason vmopcondition.ReasonCompleted, message string) {
	t.Helper()
	expectPhase(t, op, v1alpha2.VMOPPhaseFailed, reason)
	if msg := completed(op).Message; msg != message {
		t.Errorf("%s: message %q, want %q", op.Name, msg, message)
	}
	if meta.IsStatusConditionTrue(op.Status.Conditions, string(vmopcondition.TypeSignalSent)) {
		t.Errorf("%s: a refused operation sent its signal", op.Name)
	}
	eventually(t, 30*time.Second, "the Warning event of "+op.Name, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := c.admin.List(ctx, &list, client.InNamespace(op.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == op.UID && e.Type == "Warning" && e.Reason == string(v1alpha2.VMOPPhaseFailed) {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})
}

// runningVMI waits for the machine's internal VMI to run, with a pod IP, and returns it.
func runningVMI(t *testing.T, c *cluster) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	eventually(t, 2*time.Minute, "VMI running", func(ctx context.Context) error {
		if err := c.kubevirt.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName}, vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("VMI phase %s", vmi.Status.Phase)
		}
		if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
			return fmt.Errorf("no pod IP")
		}
		return nil
	})
	return vmi
}

// expectNoQEMU waits until no QEMU for the VMI's domain is left.
func expectNoQEMU(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	eventually(t, time.Minute, "no QEMU for "+vmi.Name, func(context.Context) error {
		out, _ := exec.Command("pgrep", "-f", "guest="+converter.DomainName(vmi)+",").Output()
		if pids := strings.Fields(string(out)); len(pids) > 0 {
			return fmt.Errorf("QEMU %v still runs", pids)
		}
		return nil
	})
}

// bootIDScript prints the kernel's boot ID, which is new on every boot of the guest.
const bootIDScript = `echo "boot=[$(cat /proc/sys/kernel/random/boot_id)]"`

// guestConsole opens the VMI's console (the core's console subresource through the rewriter) and
// waits until the guest's shell answers.
func guestConsole(t *testing.T, c *cluster, vmi *kubevirtv1.VirtualMachineInstance) *guesttest.Console {
	t.Helper()
	var conn *console.Conn
	eventually(t, time.Minute, "open the console", func(ctx context.Context) error {
		var err error
		conn, err = console.Open(ctx, c.kubevirtREST, vmi.Namespace, vmi.Name, "console")
		return err
	})
	con := guesttest.NewConsole(conn)
	t.Cleanup(func() { _ = con.Close() })
	if _, err := con.WaitFor(regexp.MustCompile(`vmop-marker from `), 3*time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	for i := 0; ; i++ {
		if err := con.Write(fmt.Sprintf("echo shell-up-$((%d+1000))\n", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(regexp.MustCompile(fmt.Sprintf(`shell-up-%d`, i+1000)), 5*time.Second); err == nil {
			return con
		}
		if i == 12 {
			t.Fatalf("the guest's shell does not answer\nconsole so far:\n%s", con)
		}
	}
}

// guestValue runs script, which prints name=[value], and returns value.
func guestValue(t *testing.T, con *guesttest.Console, name, script string) string {
	t.Helper()
	if err := con.Write(script + "\n"); err != nil {
		t.Fatal(err)
	}
	// The typed line holds name=[ too, but followed by a $( that no value contains.
	m, err := con.WaitFor(regexp.MustCompile(regexp.QuoteMeta(name)+`=\[([^]$]*)\]`), time.Minute)
	if err != nil {
		t.Fatalf("%s: %v\nconsole so far:\n%s", script, err, con)
	}
	return m[1]
}
