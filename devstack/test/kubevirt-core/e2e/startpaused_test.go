package e2e

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// waitPaused waits for the VM's VMI to run paused as the launcher's libvirt reports it (the
// Paused condition virt-handler writes from the domain state) and returns it.
func waitPaused(t *testing.T, kc client.Client, vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	eventually(t, 4*time.Minute, "VMI "+vm.Name+" running paused", func(ctx context.Context) error {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != kubevirtv1.Running {
			return fmt.Errorf("phase %s", vmi.Status.Phase)
		}
		for _, c := range vmi.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstancePaused && c.Status == corev1.ConditionTrue && c.Reason == "PausedByUser" {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", vmi.Status.Conditions)
	})
	return vmi
}

// launcherEndpoint waits for the Service's EndpointSlice to hold the VMI's launcher Pod with the
// given readiness.
func launcherEndpoint(t *testing.T, kube kubernetes.Interface, ns, service string, pod *corev1.Pod, ready bool) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("service %s has %s (ready %t)", service, pod.Name, ready), func(ctx context.Context) error {
		slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.TargetRef != nil && e.TargetRef.Name == pod.Name && len(e.Addresses) == 1 && e.Addresses[0] == pod.Status.PodIP &&
					e.Conditions.Ready != nil && *e.Conditions.Ready == ready {
					return nil
				}
			}
		}
		return fmt.Errorf("endpoint slices %+v", slices.Items)
	})
}

// testStartPaused starts a Halted VM with paused, as virtctl start --paused does: the VM is
// switched on, the guest is created with its vCPUs stopped (the launcher's libvirt says paused,
// the console stays silent), and it boots once unpaused. A Service made through the rewriter that
// selects the launcher by vmi.kubevirt.io/id gets the launcher's endpoint, ready once the guest
// runs. reset boots the guest again in the same VMI. A template with startStrategy Paused starts
// paused too.
func testStartPaused(t *testing.T, c *cluster, kc client.Client, ns string) {
	ctx := testenv.Context(t)
	vm := newVM(ns, "paused")
	halted := kubevirtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	createVM(t, kc, vm)
	waitVMStatus(t, kc, vm, kubevirtv1.VirtualMachineStatusStopped, time.Minute)
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachines/%s/start", ns, vm.Name)
	if out, err := testenv.KubectlInput(t, c.kubevirt, `{"paused":true}`, "replace", "--raw", path, "-f", "-"); err != nil {
		t.Fatalf("start paused: %v\n%s", err, out)
	}
	vmi := waitPaused(t, kc, vm)
	if !vmi.ShouldStartPaused() || !qemuRunning(vmi) {
		t.Fatalf("startStrategy %v, QEMU running %t", vmi.Spec.StartStrategy, qemuRunning(vmi))
	}
	waitVMStatus(t, kc, vm, kubevirtv1.VirtualMachineStatusPaused, time.Minute)
	if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Fatalf("runStrategy after a paused start %v (%v)", vm.Spec.RunStrategy, err)
	}
	con := openConsole(t, c, ns, vm.Name)
	marker := regexp.MustCompile(`e2e-marker from ` + vm.Name)
	if _, err := con.WaitFor(marker, 5*time.Second); err == nil {
		t.Fatalf("the paused guest booted:\n%s", con)
	}

	pods, err := launcherPods(ctx, kc, vmi)
	if err != nil || len(pods) != 1 || pods[0].Labels[launcherpod.IDLabel] != vm.Name {
		t.Fatalf("launcher pods %d (%v)", len(pods), err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused-ssh"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{launcherpod.IDLabel: vm.Name},
			Ports:    []corev1.ServicePort{{Name: "ssh", Port: 22, TargetPort: intstr.FromInt32(22)}},
		},
	}
	if err := kc.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), svc) })
	cfg, err := clientcmd.BuildConfigFromFlags("", c.stack.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Paused, the launcher's readiness gate holds the Pod back: the endpoint is there, not ready.
	launcherEndpoint(t, admin, ns, svc.Name, &pods[0], false)

	vmiCommand(t, c, ns, vm.Name, "unpause")
	if _, err := con.WaitFor(marker, 3*time.Minute); err != nil {
		t.Fatalf("the unpaused guest does not boot: %v\n%s", err, con)
	}
	running := waitRunning(t, kc, ns, vm.Name, "")
	launcherEndpoint(t, admin, ns, svc.Name, &pods[0], true)

	// reset is the machine's reset button: the same VMI and QEMU, the guest boots again.
	oldBoot := guestValue(t, waitShell(t, con), "boot", bootIDScript)
	vmiCommand(t, c, ns, vm.Name, "reset")
	// The first boot's kernel banner is consumed: this one is the new boot's, and so is the marker
	// after it (user-data prints it every 2 s).
	for _, re := range []*regexp.Regexp{regexp.MustCompile(`Linux version`), marker} {
		if _, err := con.WaitFor(re, 3*time.Minute); err != nil {
			t.Fatalf("the reset guest does not boot again: %v\n%s", err, con)
		}
	}
	if boot := guestValue(t, waitShell(t, con), "boot", bootIDScript); boot == oldBoot {
		t.Errorf("boot ID %s unchanged after reset", boot)
	}
	if after := waitRunning(t, kc, ns, vm.Name, ""); after.UID != running.UID || !qemuRunning(after) {
		t.Errorf("reset replaced the VMI (%s, then %s) or QEMU", running.UID, after.UID)
	}

	tmpl := newVM(ns, "paused-template")
	paused := kubevirtv1.StartStrategyPaused
	tmpl.Spec.Template.Spec.StartStrategy = &paused
	createVM(t, kc, tmpl)
	waitPaused(t, kc, tmpl)
	waitVMStatus(t, kc, tmpl, kubevirtv1.VirtualMachineStatusPaused, time.Minute)
}
