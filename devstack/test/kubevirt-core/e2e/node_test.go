package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
)

// TestVMNodeCases runs what happens to a guest on its node — a restart, a crash and a poweroff
// under RerunOnFailure, disks that do or do not outlive the guest — on one cluster, since starting
// one costs more than most of the cases. The cases use VMs of their own and run side by side:
// most of their time is spent waiting for guests to boot and controllers to react.
func TestVMNodeCases(t *testing.T) {
	c := startCluster(t)
	kc := kubevirtClient(t, c)
	// QEMU processes are found (and killed) by their domain name, <namespace>_<name>, on a machine
	// other e2e runs may share: a namespace of this run's own keeps the names apart. It goes at
	// the end (the cases' VMs went before): the cluster may be the suite's.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-cases-%d", os.Getpid())}}
	if err := kc.Create(testenv.Context(t), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kc.Delete(context.Background(), ns); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	// Launcher Pods need the namespace's default service account, which a controller adds.
	eventually(t, time.Minute, "service account default", func(ctx context.Context) error {
		return kc.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *cluster, kc client.Client, ns string)
	}{
		{"Restart", testRestart},
		{"RerunOnFailure", testRerunOnFailure},
		{"Disks", testDisks},
		{"ContainerDisk", testContainerDisk},
		{"VolumeTypes", testVolumeTypes},
		{"NodeLabels", testNodeLabels},
		{"VNC", testVNC},
		{"PortForward", testPortForward},
		{"GuestAgent", testGuestAgent},
		{"Hotplug", testHotplug},
		{"StartPaused", testStartPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, c, kc, ns.Name)
		})
	}
}

// createVM creates vm and makes sure it is gone at the end of the test, with no launcher Pod and
// no QEMU left for it, whatever happened in between.
func createVM(t *testing.T, kc client.Client, vm *kubevirtv1.VirtualMachine) {
	t.Helper()
	if err := kc.Create(testenv.Context(t), vm); err != nil {
		t.Fatalf("create VM %s: %v", vm.Name, err)
	}
	t.Cleanup(func() { deleteVM(t, kc, vm) })
}

// deleteVM deletes the VM and waits until it, its launcher Pods and its QEMU are gone.
func deleteVM(t *testing.T, kc client.Client, vm *kubevirtv1.VirtualMachine) {
	t.Helper()
	// It runs as a cleanup, when the test's contexts may be spent.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := kc.Delete(ctx, vm); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete VM %s: %v", vm.Name, err)
		return
	}
	// Every VMI of the VM runs as the same domain, so one name finds the QEMU of any of them.
	probe := &kubevirtv1.VirtualMachineInstance{}
	probe.Namespace, probe.Name = vm.Namespace, vm.Name
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for {
		err := vmGone(ctx, kc, vm)
		if err == nil && qemuRunning(probe) {
			err = fmt.Errorf("QEMU still runs")
		}
		if err == nil {
			t.Logf("VM %s deleted, no launcher Pod and no QEMU left after %s", vm.Name, time.Since(start).Round(time.Second))
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("VM %s not cleaned up: %v", vm.Name, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func vmGone(ctx context.Context, kc client.Client, vm *kubevirtv1.VirtualMachine) error {
	key := client.ObjectKeyFromObject(vm)
	if err := kc.Get(ctx, key, &kubevirtv1.VirtualMachine{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("VM still there (%v)", err)
	}
	if err := kc.Get(ctx, key, &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("VMI still there (%v)", err)
	}
	var pods corev1.PodList
	if err := kc.List(ctx, &pods, client.InNamespace(vm.Namespace), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "virt-launcher-"+vm.Name+"-") {
			return fmt.Errorf("launcher pod %s left", p.Name)
		}
	}
	return nil
}

// waitVMStatus waits until the VM shows the printable status.
func waitVMStatus(t *testing.T, kc client.Client, vm *kubevirtv1.VirtualMachine, want kubevirtv1.VirtualMachinePrintableStatus, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("VM %s %s", vm.Name, want), func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachine{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return err
		}
		if cur.Status.PrintableStatus != want {
			return fmt.Errorf("printableStatus %s", cur.Status.PrintableStatus)
		}
		return nil
	})
}

// guestConsole opens the VM's console and waits until the guest's shell answers: the user-data
// marker shows the boot got far, but what is typed before the shell starts is lost, so it asks
// until an answer comes.
func guestConsole(t *testing.T, c *cluster, vm *kubevirtv1.VirtualMachine) *guesttest.Console {
	t.Helper()
	con := openConsole(t, c, vm.Namespace, vm.Name)
	if _, err := con.WaitFor(regexp.MustCompile(`e2e-marker from `+vm.Name), 3*time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	return waitShell(t, con)
}

// waitShell waits on a console whose guest has booted until its shell answers.
func waitShell(t *testing.T, con *guesttest.Console) *guesttest.Console {
	t.Helper()
	for i := 0; ; i++ {
		// The answer is computed, so the echo of the typed line does not match it.
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

var doneMarker = regexp.MustCompile(`(?s)(.*)e2e-done-4242`)

// guestRun types script on the console and returns what came back until the script finished,
// the echo of the typed line included.
func guestRun(t *testing.T, con *guesttest.Console, script string) string {
	t.Helper()
	if err := con.Write(script + "; echo e2e-done-$((4200+42))\n"); err != nil {
		t.Fatal(err)
	}
	m, err := con.WaitFor(doneMarker, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v\nconsole so far:\n%s", script, err, con)
	}
	return m[1]
}

// guestValue runs script, which prints name=[value], and returns value.
func guestValue(t *testing.T, con *guesttest.Console, name, script string) string {
	t.Helper()
	out := guestRun(t, con, script)
	// The typed line holds name=[ too, but followed by a $( that no value contains.
	m := regexp.MustCompile(regexp.QuoteMeta(name) + `=\[([^]$]*)\]`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no %s=[...] in the output:\n%s", script, name, out)
	}
	return m[1]
}

// history records every state the VMIs and launcher Pods of a namespace pass through, so that a
// test can check states that last only a moment, such as a failed VMI its VM replaces at once.
type history struct {
	mu   sync.Mutex
	vmis []kubevirtv1.VirtualMachineInstance
	pods []corev1.Pod
}

func recordHistory(t *testing.T, c *cluster, ns string) *history {
	t.Helper()
	wc, err := client.NewWithWatch(c.rest, client.Options{Scheme: kubevirtClient(t, c).Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, list := range []client.ObjectList{&kubevirtv1.VirtualMachineInstanceList{}, &corev1.PodList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					if ev.Type == watch.Error {
						continue
					}
					h.mu.Lock()
					switch o := ev.Object.(type) {
					case *kubevirtv1.VirtualMachineInstance:
						h.vmis = append(h.vmis, *o.DeepCopy())
					case *corev1.Pod:
						h.pods = append(h.pods, *o.DeepCopy())
					}
					h.mu.Unlock()
				}
			}
		}()
	}
	return h
}

// vmi returns the last recorded state of the VMI with the UID that satisfies ok, if any did.
func (h *history) vmi(uid types.UID, ok func(*kubevirtv1.VirtualMachineInstance) bool) *kubevirtv1.VirtualMachineInstance {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.vmis) - 1; i >= 0; i-- {
		if v := &h.vmis[i]; v.UID == uid && ok(v) {
			return v.DeepCopy()
		}
	}
	return nil
}

// launcherExit returns the terminated state of the compute container of the VMI's launcher Pod,
// if one was recorded.
func (h *history) launcherExit(vmiUID types.UID) *corev1.ContainerStateTerminated {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.pods) - 1; i >= 0; i-- {
		p := &h.pods[i]
		if p.Labels[kubevirtv1.CreatedByLabel] != string(vmiUID) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "compute" && cs.State.Terminated != nil {
				return cs.State.Terminated.DeepCopy()
			}
		}
	}
	return nil
}

// readyMessage is the message of the VMI's Ready condition, which tells how a finished guest ended.
func readyMessage(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady {
			return c.Message
		}
	}
	return ""
}
