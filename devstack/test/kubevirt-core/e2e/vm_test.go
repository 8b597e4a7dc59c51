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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/console"
	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// userData keeps printing a marker, so that a console opened at any time sees the user-data
// command's output.
const userData = `#!/bin/sh
(while true; do echo "e2e-marker from $(hostname)"; sleep 2; done) &
`

func newVM(ns, name string) *kubevirtv1.VirtualMachine {
	always := kubevirtv1.RunStrategyAlways
	grace := int64(20)
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &always,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					TerminationGracePeriodSeconds: &grace,
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
	return vm
}

func kubevirtClient(t testing.TB, c *cluster) client.Client {
	t.Helper()
	scheme, err := corescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(c.rest, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// vmCommand calls a VM subresource (start, stop, restart) as virtctl does.
func vmCommand(t *testing.T, c *cluster, ns, name, cmd string) {
	t.Helper()
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachines/%s/%s", ns, name, cmd)
	if out, err := testenv.KubectlInput(t, c.kubevirt, "{}", "replace", "--raw", path, "-f", "-"); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

func vmiCommand(t *testing.T, c *cluster, ns, name, cmd string) {
	t.Helper()
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/%s", ns, name, cmd)
	if out, err := testenv.KubectlInput(t, c.kubevirt, "{}", "replace", "--raw", path, "-f", "-"); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

// waitRunning waits for the VM to run, with its VMI Ready and a pod IP, and returns the VMI.
func waitRunning(t *testing.T, kc client.Client, ns, name string, notUID types.UID) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	eventually(t, 4*time.Minute, "VM "+name+" running", func(ctx context.Context) error {
		vm := &kubevirtv1.VirtualMachine{}
		if err := kc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vm); err != nil {
			return err
		}
		if vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusRunning {
			return fmt.Errorf("printableStatus %s", vm.Status.PrintableStatus)
		}
		if err := kc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vmi); err != nil {
			return err
		}
		if vmi.UID == notUID {
			return fmt.Errorf("still the old VMI")
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("VMI phase %s", vmi.Status.Phase)
		}
		ready := false
		for _, cond := range vmi.Status.Conditions {
			if cond.Type == kubevirtv1.VirtualMachineInstanceReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("VMI not Ready: %+v", vmi.Status.Conditions)
		}
		if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
			return fmt.Errorf("VMI has no pod IP: %+v", vmi.Status.Interfaces)
		}
		return nil
	})
	return vmi
}

func openConsole(t *testing.T, c *cluster, ns, name string) *guesttest.Console {
	t.Helper()
	var conn *console.Conn
	eventually(t, time.Minute, "open the console", func(ctx context.Context) error {
		var err error
		conn, err = console.Open(ctx, c.rest, ns, name, "console")
		return err
	})
	con := guesttest.NewConsole(conn)
	t.Cleanup(func() { _ = con.Close() })
	return con
}

// qemuRunning reports whether a QEMU process runs the VMI's domain.
func qemuRunning(vmi *kubevirtv1.VirtualMachineInstance) bool {
	out, _ := exec.Command("pgrep", "-f", "guest="+converter.DomainName(vmi)+",").Output()
	return strings.TrimSpace(string(out)) != ""
}

func TestVMLifecycleOnARealGuest(t *testing.T) {
	c := startCluster(t)
	kc := kubevirtClient(t, c)
	ctx := testenv.Context(t)
	ns := "default"
	vm := newVM(ns, "guest")
	if err := kc.Create(ctx, vm); err != nil {
		t.Fatalf("create VM: %v", err)
	}
	vmi := waitRunning(t, kc, ns, vm.Name, "")
	if !qemuRunning(vmi) {
		t.Fatal("the VMI is Running but no QEMU runs its domain")
	}
	// The cluster holds it under the renamed kind only.
	if out, err := testenv.KubectlInput(t, c.stack.KubeconfigPath(), "", "get", "intvirtvm", vm.Name, "-n", ns, "-o", "name"); err != nil ||
		strings.TrimSpace(out) != "internalvirtualizationvirtualmachine.internal.virtualization.deckhouse.io/"+vm.Name {
		t.Errorf("the cluster does not hold the renamed VM: %v\n%s", err, out)
	}

	t.Log("console: the user-data command's output, and a command typed in")
	con := openConsole(t, c, ns, vm.Name)
	if _, err := con.WaitFor(regexp.MustCompile(`e2e-marker from guest`), 90*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	if err := con.Write("echo answer-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`answer-42`), 30*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}

	t.Log("pause stops the guest's vCPUs; unpause lets it go on")
	vmiCommand(t, c, ns, vm.Name, "pause")
	eventually(t, 30*time.Second, "VMI paused", func(ctx context.Context) error {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			return err
		}
		for _, cond := range vmi.Status.Conditions {
			if cond.Type == kubevirtv1.VirtualMachineInstancePaused && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", vmi.Status.Conditions)
	})
	if err := con.Write("echo paused-$((1+1))\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`paused-2`), 4*time.Second); err == nil {
		t.Fatal("a paused guest answered on its console")
	}
	vmiCommand(t, c, ns, vm.Name, "unpause")
	if _, err := con.WaitFor(regexp.MustCompile(`paused-2`), 30*time.Second); err != nil {
		t.Fatalf("after unpause: %v\nconsole so far:\n%s", err, con)
	}

	t.Log("stop powers the guest off; start boots it again")
	vmCommand(t, c, ns, vm.Name, "stop")
	eventually(t, 2*time.Minute, "VM stopped", func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachine{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return err
		}
		if cur.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusStopped {
			return fmt.Errorf("printableStatus %s", cur.Status.PrintableStatus)
		}
		if qemuRunning(vmi) {
			return fmt.Errorf("QEMU still runs")
		}
		return nil
	})
	expectVMIEvents(t, kc, vmi, "virt-handler", "Started", "Paused", "Resumed", "ShuttingDown|Stopped")
	vmCommand(t, c, ns, vm.Name, "start")
	vmi = waitRunning(t, kc, ns, vm.Name, vmi.UID)
	con = openConsole(t, c, ns, vm.Name)
	if _, err := con.WaitFor(regexp.MustCompile(`e2e-marker from guest`), 90*time.Second); err != nil {
		t.Fatalf("after start: %v\nconsole so far:\n%s", err, con)
	}

	checkMetrics(t, c, kc, vmi)

	t.Log("deleting the VM leaves nothing behind")
	left := launcherFootprint(t, c, kc, vmi)
	if err := kc.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "VM and its launcher gone", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := kc.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d launcher pods left", len(pods.Items))
		}
		if qemuRunning(vmi) {
			return fmt.Errorf("QEMU still runs")
		}
		return left.gone(ctx)
	})
}
