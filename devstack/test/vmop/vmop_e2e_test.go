package vmop

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/console"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmop"
)

// userData keeps printing a marker, so that a console opened at any time sees the guest is up.
const userData = `#!/bin/sh
(while true; do echo "vmop-marker from $(hostname)"; sleep 2; done) &
`

// TestOperationsOnARealGuest drives one machine through every operation type: Start boots the
// guest, a second Start fails for the phase, Migrate and Evict move the running guest between
// the two nodes (its boot ID unchanged), Restart boots it again (a new boot ID), a graceful Stop
// shuts it down and a forced Stop kills it, and a Stop supersedes a Start still booting the
// guest. Every operation's status, events and phase metric are checked on the way.
func TestOperationsOnARealGuest(t *testing.T) {
	c := startCluster(t, "node-a", "node-b")
	ctx := testenv.Context(t)
	ns := "default"
	vm := machine(t, c, ns, "worker")
	mirrorPhase(t, c, vm)

	t.Log("Start boots the guest")
	start := runOp(t, c, ns, "start", v1alpha2.VMOPTypeStart, false, 5*time.Minute)
	expectPhase(t, start, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	vmi := runningVMI(t, c, ns, vm.Name)
	con := guestConsole(t, c, vmi)
	boot := guestValue(t, con, "boot", bootIDScript)

	t.Log("Start of the running machine fails with its reason")
	again := runOp(t, c, ns, "start-again", v1alpha2.VMOPTypeStart, false, time.Minute)
	expectPhase(t, again, v1alpha2.VMOPPhaseFailed, vmopcondition.ReasonNotApplicableForVMPhase)
	if msg := completed(again).Message; msg != "Operation type Start is not applicable for VirtualMachine in phase Running" {
		t.Errorf("message %q", msg)
	}
	expectEvent(t, c, again, "Warning", "Failed")

	t.Log("the spec of an operation cannot change")
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"type":"Stop"}}`))
	if err := c.kc.Patch(ctx, again, patch); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing spec.type: %v, want the immutability denial", err)
	}

	for _, typ := range []v1alpha2.VMOPType{v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict} {
		from := vmi.Status.NodeName
		t.Logf("%s moves the guest off %s", typ, from)
		op := runOp(t, c, ns, strings.ToLower(string(typ)), typ, false, 5*time.Minute)
		expectPhase(t, op, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
		if op.Status.Progress != "100%" {
			t.Errorf("%s progress %q", typ, op.Status.Progress)
		}
		vmi = runningVMI(t, c, ns, vm.Name)
		if vmi.Status.NodeName == from {
			t.Errorf("after %s the VMI still runs on %s", typ, from)
		}
		con = guestConsole(t, c, vmi)
		if got := guestValue(t, con, "boot", bootIDScript); got != boot {
			t.Errorf("boot ID %s after %s, was %s: the guest booted again", got, typ, boot)
		}
	}

	t.Log("Restart boots the guest again")
	restart := runOp(t, c, ns, "restart", v1alpha2.VMOPTypeRestart, false, 5*time.Minute)
	expectPhase(t, restart, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	old := vmi.UID
	vmi = runningVMI(t, c, ns, vm.Name)
	if vmi.UID == old {
		t.Error("Restart completed with the old VMI")
	}
	con = guestConsole(t, c, vmi)
	if got := guestValue(t, con, "boot", bootIDScript); got == boot {
		t.Errorf("boot ID %s unchanged after Restart", got)
	}

	t.Log("a graceful Stop shuts the guest down")
	stop := runOp(t, c, ns, "stop", v1alpha2.VMOPTypeStop, false, 3*time.Minute)
	expectPhase(t, stop, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	expectNoQEMU(t, vmi)

	t.Log("a forced Stop kills it")
	expectPhase(t, runOp(t, c, ns, "start-2", v1alpha2.VMOPTypeStart, false, 5*time.Minute), v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	vmi = runningVMI(t, c, ns, vm.Name)
	began := time.Now()
	kill := runOp(t, c, ns, "kill", v1alpha2.VMOPTypeStop, true, 2*time.Minute)
	expectPhase(t, kill, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	expectNoQEMU(t, vmi)
	t.Logf("forced Stop took %s (grace period %ds)", time.Since(began).Round(time.Second), *gracePeriod)

	t.Log("a Stop supersedes the Start that is still booting the guest")
	boot3 := createOp(t, c, ns, "start-3", v1alpha2.VMOPTypeStart, false)
	eventually(t, 2*time.Minute, "worker Starting", func(ctx context.Context) error {
		cur := &v1alpha2.VirtualMachine{}
		if err := c.kc.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return err
		}
		if cur.Status.Phase != v1alpha2.MachineStarting {
			return fmt.Errorf("phase %s", cur.Status.Phase)
		}
		return nil
	})
	halt := waitOp(t, c, createOp(t, c, ns, "halt", v1alpha2.VMOPTypeStop, false), 3*time.Minute)
	expectPhase(t, halt, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	superseded := waitOp(t, c, boot3, time.Minute)
	expectPhase(t, superseded, v1alpha2.VMOPPhaseSuperseded, vmopcondition.ReasonSuperseded)
	if msg := completed(superseded).Message; msg != "Superseded by halt with type Stop" {
		t.Errorf("message %q", msg)
	}
	eventually(t, time.Minute, "no VMI left", func(ctx context.Context) error {
		err := c.kc.Get(ctx, client.ObjectKeyFromObject(vm), &kubevirtv1.VirtualMachineInstance{})
		if err == nil {
			return fmt.Errorf("the VMI is still there")
		}
		return client.IgnoreNotFound(err)
	})
	expectNoQEMU(t, vmi)

	t.Log("the phase metric")
	want := map[string]v1alpha2.VMOPPhase{"start": v1alpha2.VMOPPhaseCompleted, "start-again": v1alpha2.VMOPPhaseFailed, "kill": v1alpha2.VMOPPhaseCompleted, "start-3": v1alpha2.VMOPPhaseSuperseded}
	got := phaseMetric(t, c)
	for name, phase := range want {
		for _, p := range vmop.Phases {
			v, ok := got[ns+"/"+name+"/"+string(p)]
			if !ok || (v == 1) != (p == phase) {
				t.Errorf("%s{name=%q,phase=%q} = %v (present %v), want it 1 for %s only", vmop.MetricStatusPhase, name, p, v, ok, phase)
			}
		}
	}
}

var gracePeriod = ptr.To(int64(30))

// machine creates the friendly VirtualMachine and, standing in for the VirtualMachine
// reconciler (pkg/controller/vm, not there yet), the internal VM of the same name with
// runStrategy Manual, as that reconciler makes it. Both go when the test ends.
func machine(t *testing.T, c *cluster, ns, name string) *v1alpha2.VirtualMachine {
	t.Helper()
	ctx := testenv.Context(t)
	vm := &v1alpha2.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.VirtualMachineSpec{
			RunPolicy:       v1alpha2.ManualPolicy,
			CPU:             v1alpha2.CPUSpec{Cores: 1, CoreFraction: "100%"},
			Memory:          v1alpha2.MemorySpec{Size: resource.MustParse("128Mi")},
			BlockDeviceRefs: []v1alpha2.BlockDeviceSpecRef{{Kind: v1alpha2.VirtualDiskKind, Name: "root"}},
		},
	}
	if err := c.kc.Create(ctx, vm); err != nil {
		t.Fatalf("create VirtualMachine: %v", err)
	}
	manual := kubevirtv1.RunStrategyManual
	kvvm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID, Controller: ptr.To(true)}}},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &manual,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					TerminationGracePeriodSeconds: gracePeriod,
					Domain: kubevirtv1.DomainSpec{
						Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
						Devices: kubevirtv1.Devices{
							Disks: []kubevirtv1.Disk{
								{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
								{Name: "cloudinit", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
							},
							Interfaces: []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}},
						},
					},
					Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
					Volumes: []kubevirtv1.Volume{
						{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: guestImage}}},
						{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userData}}},
					},
				},
			},
		},
	}
	if err := c.kc.Create(ctx, kvvm); err != nil {
		t.Fatalf("create the internal VM: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, obj := range []client.Object{kvvm, vm} {
			if err := c.kc.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %s: %v", obj.GetName(), err)
			}
		}
	})
	return vm
}

// mirrorPhase writes the friendly machine's status.phase from the internal VM's printable
// status until the test ends: what the VirtualMachine reconciler does, which is not there yet.
func mirrorPhase(t *testing.T, c *cluster, vm *v1alpha2.VirtualMachine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			kvvm := &kubevirtv1.VirtualMachine{}
			cur := &v1alpha2.VirtualMachine{}
			if c.kc.Get(ctx, client.ObjectKeyFromObject(vm), kvvm) == nil && c.kc.Get(ctx, client.ObjectKeyFromObject(vm), cur) == nil {
				if phase := phaseOf(kvvm.Status.PrintableStatus); cur.Status.Phase != phase {
					patch := client.MergeFrom(cur.DeepCopy())
					cur.Status.Phase = phase
					_ = c.kc.Status().Patch(ctx, cur, patch)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func phaseOf(s kubevirtv1.VirtualMachinePrintableStatus) v1alpha2.MachinePhase {
	switch s {
	case kubevirtv1.VirtualMachineStatusStopped, "":
		return v1alpha2.MachineStopped
	case kubevirtv1.VirtualMachineStatusRunning:
		return v1alpha2.MachineRunning
	case kubevirtv1.VirtualMachineStatusStopping:
		return v1alpha2.MachineStopping
	case kubevirtv1.VirtualMachineStatusMigrating:
		return v1alpha2.MachineMigrating
	case kubevirtv1.VirtualMachineStatusPaused:
		return v1alpha2.MachinePause
	case kubevirtv1.VirtualMachineStatusTerminating:
		return v1alpha2.MachineTerminating
	}
	return v1alpha2.MachineStarting
}

// runOp creates an operation and waits until it finishes.
func runOp(t *testing.T, c *cluster, ns, name string, typ v1alpha2.VMOPType, force bool, timeout time.Duration) *v1alpha2.VirtualMachineOperation {
	t.Helper()
	return waitOp(t, c, createOp(t, c, ns, name, typ, force), timeout)
}

// createOp creates an operation on the machine worker; it is deleted when the test ends.
func createOp(t *testing.T, c *cluster, ns, name string, typ v1alpha2.VMOPType, force bool) *v1alpha2.VirtualMachineOperation {
	t.Helper()
	op := &v1alpha2.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha2.VirtualMachineOperationSpec{Type: typ, VirtualMachineName: "worker"},
	}
	if force {
		op.Spec.Force = ptr.To(true)
	}
	if err := c.kc.Create(testenv.Context(t), op); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.kc.Delete(context.Background(), op); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	return op
}

// waitOp waits until the operation finishes, logging the phases it went through.
func waitOp(t *testing.T, c *cluster, op *v1alpha2.VirtualMachineOperation, timeout time.Duration) *v1alpha2.VirtualMachineOperation {
	t.Helper()
	name, typ := op.Name, op.Spec.Type
	began := time.Now()
	var seen []string
	eventually(t, timeout, name+" finished", func(ctx context.Context) error {
		if err := c.kc.Get(ctx, client.ObjectKeyFromObject(op), op); err != nil {
			return err
		}
		step := string(op.Status.Phase)
		if cond := completed(op); cond != nil {
			step += "/" + cond.Reason
		}
		if op.Status.Progress != "" {
			step += " " + op.Status.Progress
		}
		if n := len(seen); n == 0 || seen[n-1] != step {
			seen = append(seen, step)
		}
		if !vmop.IsFinished(op) {
			return fmt.Errorf("phase %s", step)
		}
		return nil
	})
	t.Logf("%s (%s): %s in %s", name, typ, strings.Join(seen, " -> "), time.Since(began).Round(100*time.Millisecond))
	return op
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

// expectEvent waits for an Event about op with the type and reason.
func expectEvent(t *testing.T, c *cluster, op *v1alpha2.VirtualMachineOperation, kind, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, "event "+reason+" of "+op.Name, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := c.kc.List(ctx, &list, client.InNamespace(op.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == op.UID && e.Type == kind && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})
}

// runningVMI waits for the machine's VMI to run, with a pod IP, and returns it.
func runningVMI(t *testing.T, c *cluster, ns, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	eventually(t, 2*time.Minute, "VMI "+name+" running", func(ctx context.Context) error {
		if err := c.kc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != kubevirtv1.Running || vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed {
			return fmt.Errorf("VMI phase %s", vmi.Status.Phase)
		}
		if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
			return fmt.Errorf("no pod IP")
		}
		return nil
	})
	return vmi
}

// expectNoQEMU waits until no VMI of the machine and no QEMU for its domain is left.
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

// guestConsole opens the VMI's console (through the core's console subresource) and waits until
// the guest's shell answers.
func guestConsole(t *testing.T, c *cluster, vmi *kubevirtv1.VirtualMachineInstance) *guesttest.Console {
	t.Helper()
	var conn *console.Conn
	eventually(t, time.Minute, "open the console", func(ctx context.Context) error {
		var err error
		conn, err = console.Open(ctx, c.rest, vmi.Namespace, vmi.Name, "console")
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

// phaseMetric gathers the operations' phase metric as the controller's registry serves it:
// namespace/name/phase to value.
func phaseMetric(t *testing.T, c *cluster) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(vmop.NewPhaseCollector(c.cached)); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != vmop.MetricStatusPhase {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["namespace"]+"/"+l["name"]+"/"+l["phase"]] = m.GetGauge().GetValue()
		}
	}
	return out
}
