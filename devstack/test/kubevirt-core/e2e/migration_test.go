package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// qemuCount is how many QEMU processes run the VMI's domain.
func qemuCount(vmi *kubevirtv1.VirtualMachineInstance) int {
	out, _ := exec.Command("pgrep", "-f", "guest="+converter.DomainName(vmi)+",").Output()
	return len(strings.Fields(string(out)))
}

// launcherPods lists the VMI's launcher Pods.
func launcherPods(ctx context.Context, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := kc.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{
		kubevirtv1.AppLabel: "virt-launcher", kubevirtv1.CreatedByLabel: string(vmi.UID),
	})
	return pods.Items, err
}

func newMigration(ns, name, vmiName string, annotations map[string]string) *kubevirtv1.VirtualMachineInstanceMigration {
	return &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmiName},
	}
}

// waitMigration waits for the migration to end and returns it; it must end in phase want.
func waitMigration(t *testing.T, kc client.Client, m *kubevirtv1.VirtualMachineInstanceMigration, want kubevirtv1.VirtualMachineInstanceMigrationPhase, timeout time.Duration) *kubevirtv1.VirtualMachineInstanceMigration {
	t.Helper()
	cur := &kubevirtv1.VirtualMachineInstanceMigration{}
	var seen []kubevirtv1.VirtualMachineInstanceMigrationPhase
	eventually(t, timeout, "migration "+m.Name+" "+string(want), func(ctx context.Context) error {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
			return err
		}
		if n := len(seen); n == 0 || seen[n-1] != cur.Status.Phase {
			seen = append(seen, cur.Status.Phase)
			t.Logf("migration %s: %s", m.Name, cur.Status.Phase)
		}
		if cur.IsFinal() && cur.Status.Phase != want {
			t.Fatalf("migration ended %s, want %s: %+v", cur.Status.Phase, want, cur.Status.MigrationState)
		}
		if cur.Status.Phase != want {
			return fmt.Errorf("phase %s", cur.Status.Phase)
		}
		return nil
	})
	return cur
}

// TestLiveMigration moves a running guest between the two local nodes: a migration whose target
// cannot be scheduled fails and leaves the guest where it is; then one succeeds, and the guest's
// shell, seen through a console opened afterwards on the new node, still has what was typed
// into it before.
func TestLiveMigration(t *testing.T) {
	c := startCluster(t)
	kc := kubevirtClient(t, c)
	ctx := testenv.Context(t)
	ns := "default"
	vm := newVM(ns, "mover")
	if err := kc.Create(ctx, vm); err != nil {
		t.Fatalf("create VM: %v", err)
	}
	vmi := waitRunning(t, kc, ns, vm.Name, "")
	source := vmi.Status.NodeName
	target := c.nodes[0]
	if target == source {
		target = c.nodes[1]
	}
	pods, err := launcherPods(ctx, kc, vmi)
	if err != nil || len(pods) != 1 {
		t.Fatalf("launcher pods %d: %v", len(pods), err)
	}
	sourcePod := pods[0]
	t.Logf("VMI runs on %s in %s", source, sourcePod.Name)
	// A containerDisk and cloud-init are made again on the target: virt-handler calls it
	// LiveMigratable.
	if !vmi.IsMigratable() {
		t.Errorf("the running VMI is not LiveMigratable: %+v", vmi.Status.Conditions)
	}

	t.Log("state in the guest's shell: a variable and a file")
	con := openConsole(t, c, ns, vm.Name)
	if _, err := con.WaitFor(regexp.MustCompile(`e2e-marker from mover`), 90*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	mark := fmt.Sprintf("m%06d", time.Now().UnixNano()%1000000)
	if err := con.Write("export MARK=" + mark + "; echo $MARK > /tmp/mark; echo set-$MARK-done\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`set-`+mark+`-done`), 30*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}

	t.Log("a migration whose target cannot be scheduled fails; the guest stays")
	admin := c.stack.KubeconfigPath()
	if out, err := testenv.KubectlInput(t, admin, "", "cordon", target); err != nil {
		t.Fatalf("cordon: %v\n%s", err, out)
	}
	// The cluster may be the suite's: the node is schedulable again whatever happens here.
	t.Cleanup(func() { _, _ = testenv.KubectlInput(t, admin, "", "uncordon", target) })
	stuck := newMigration(ns, "mover-stuck", vm.Name, map[string]string{kubevirtv1.MigrationUnschedulablePodTimeoutSecondsAnnotation: "5"})
	if err := kc.Create(ctx, stuck); err != nil {
		t.Fatalf("create migration: %v", err)
	}
	failed := waitMigration(t, kc, stuck, kubevirtv1.MigrationFailed, 2*time.Minute)
	t.Logf("failed as expected: %s", failed.Status.MigrationState.FailureReason)
	if out, err := testenv.KubectlInput(t, admin, "", "uncordon", target); err != nil {
		t.Fatalf("uncordon: %v\n%s", err, out)
	}
	eventually(t, time.Minute, "guest still on "+source+" with one launcher", func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return err
		}
		if cur.Status.Phase != kubevirtv1.Running || cur.Status.NodeName != source {
			return fmt.Errorf("VMI %s on %s", cur.Status.Phase, cur.Status.NodeName)
		}
		pods, err := launcherPods(ctx, kc, cur)
		if err != nil {
			return err
		}
		if len(pods) != 1 || pods[0].UID != sourcePod.UID {
			return fmt.Errorf("%d launcher pods", len(pods))
		}
		return nil
	})

	t.Log("live migration to " + target)
	start := time.Now()
	mig := newMigration(ns, "mover-mig", vm.Name, nil)
	if err := kc.Create(ctx, mig); err != nil {
		t.Fatalf("create migration: %v", err)
	}
	done := waitMigration(t, kc, mig, kubevirtv1.MigrationSucceeded, 5*time.Minute)
	t.Logf("migration succeeded in %s: %+v", time.Since(start).Round(time.Second), done.Status.MigrationState)

	moved := &kubevirtv1.VirtualMachineInstance{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), moved); err != nil {
		t.Fatal(err)
	}
	ms := moved.Status.MigrationState
	switch {
	case moved.Status.NodeName != target:
		t.Errorf("VMI on %s, want %s", moved.Status.NodeName, target)
	case moved.Labels[kubevirtv1.NodeNameLabel] != target:
		t.Errorf("label %s=%s, want %s", kubevirtv1.NodeNameLabel, moved.Labels[kubevirtv1.NodeNameLabel], target)
	case moved.Labels[kubevirtv1.MigrationTargetNodeNameLabel] != "":
		t.Errorf("label %s still set", kubevirtv1.MigrationTargetNodeNameLabel)
	case ms == nil || !ms.Completed || ms.Failed || ms.SourceNode != source || ms.TargetNode != target || ms.MigrationUID != done.UID ||
		ms.StartTimestamp == nil || ms.EndTimestamp == nil || !ms.TargetNodeDomainDetected:
		t.Errorf("migration state %+v", ms)
	case moved.Status.Phase != kubevirtv1.Running:
		t.Errorf("VMI phase %s", moved.Status.Phase)
	}
	if t.Failed() {
		t.FailNow()
	}
	waitRunning(t, kc, ns, vm.Name, "")
	eventually(t, 2*time.Minute, "source pod gone, one QEMU", func(ctx context.Context) error {
		pods, err := launcherPods(ctx, kc, moved)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.UID == sourcePod.UID {
				return fmt.Errorf("source pod %s still there (%s)", p.Name, p.Status.Phase)
			}
			if p.Spec.NodeName != target {
				return fmt.Errorf("pod %s on %s", p.Name, p.Spec.NodeName)
			}
		}
		if len(pods) != 1 {
			return fmt.Errorf("%d launcher pods", len(pods))
		}
		if n := qemuCount(moved); n != 1 {
			return fmt.Errorf("%d QEMU processes run the guest", n)
		}
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return err
		}
		if len(cur.Status.Interfaces) == 0 || cur.Status.Interfaces[0].IP != pods[0].Status.PodIP {
			return fmt.Errorf("interfaces %+v, want the target pod's IP %s", cur.Status.Interfaces, pods[0].Status.PodIP)
		}
		return nil
	})

	t.Log("a console opened now reaches the same shell")
	after := openConsole(t, c, ns, vm.Name)
	if err := after.Write("echo got-$MARK-$(cat /tmp/mark)-end\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := after.WaitFor(regexp.MustCompile(`got-`+mark+`-`+mark+`-end`), 30*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, after)
	}
	vmNow := &kubevirtv1.VirtualMachine{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), vmNow); err != nil {
		t.Fatal(err)
	}
	if vmNow.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusRunning {
		t.Errorf("VM printableStatus %s", vmNow.Status.PrintableStatus)
	}

	t.Log("the migrated guest stops like any other")
	if err := kc.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "VM and its launcher gone", func(ctx context.Context) error {
		pods, err := launcherPods(ctx, kc, moved)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d launcher pods left", len(pods))
		}
		if n := qemuCount(moved); n > 0 {
			return fmt.Errorf("%d QEMU processes still run", n)
		}
		return nil
	})
}
