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
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// testContainerDisk boots a VM from the tiny guest in DVCR, as a user's containerDisk from a
// registry: the launcher Pod's container volumeroot pulls the image (the node's registry
// configuration gives DVCR's CA and credentials), serves its disk, and the guest runs on a qcow2
// overlay over it; a containerDisk that is not in the registry leaves the VMI unscheduled with
// the Pod's pull error, not a guest without its disk.
func testContainerDisk(t *testing.T, c *cluster, kc client.Client, ns string) {
	vm := newVM(ns, "cdisk")
	vm.Spec.Template.Spec.Volumes[0].ContainerDisk.ImagePullPolicy = corev1.PullAlways
	createVM(t, kc, vm)
	vmi := waitRunning(t, kc, ns, vm.Name, "")

	pods, err := launcherPods(testenv.Context(t), kc, vmi)
	if err != nil || len(pods) != 1 {
		t.Fatalf("launcher Pods %d, %v", len(pods), err)
	}
	pod := pods[0]
	var disk *corev1.ContainerStatus
	for i, s := range pod.Status.ContainerStatuses {
		if s.Name == "volumeroot" {
			disk = &pod.Status.ContainerStatuses[i]
		}
	}
	if disk == nil || disk.State.Running == nil || disk.Image != guestImage {
		t.Fatalf("containerDisk container %+v, want volumeroot running %s", disk, guestImage)
	}
	if len(pod.Status.InitContainerStatuses) != 1 || pod.Status.InitContainerStatuses[0].State.Terminated == nil ||
		pod.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init container %+v, want container-disk-binary done", pod.Status.InitContainerStatuses)
	}
	pulled := false
	var events corev1.EventList
	if err := kc.List(testenv.Context(t), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == pod.Name && e.Reason == "Pulled" && strings.Contains(e.Message, guestImage) {
			pulled = true
		}
	}
	if !pulled {
		t.Errorf("no Pulled event for %s on Pod %s", guestImage, pod.Name)
	}

	t.Log("the guest's root is a qcow2 overlay backed by the descriptor the container handed over")
	overlay := launcherFile(t, c, vmi, "disk-root.qcow2")
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", overlay).Output()
	if err != nil {
		t.Fatalf("qemu-img info %s: %v", overlay, err)
	}
	if !regexp.MustCompile(`"backing-filename": "/proc/\d+/fd/\d+"`).Match(out) {
		t.Errorf("overlay %s: %s", overlay, out)
	}
	con := guestConsole(t, c, vm)
	if got := guestRun(t, con, "echo cdisk-$((6*7))"); !strings.Contains(got, "cdisk-42") {
		t.Errorf("console: %q", got)
	}

	t.Log("an image that is not in the registry: the Pod does not start, the VMI does not run")
	missing := newVM(ns, "cdisk-missing")
	missing.Spec.Template.Spec.Volumes[0].ContainerDisk.Image = guestImage + "-missing"
	createVM(t, kc, missing)
	eventually(t, 2*time.Minute, "pull error of the missing image", func(ctx context.Context) error {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(missing), vmi); err != nil {
			return err
		}
		if vmi.Status.Phase == kubevirtv1.Running {
			t.Fatalf("a VMI without its containerDisk runs")
		}
		pods, err := launcherPods(ctx, kc, vmi)
		if err != nil || len(pods) == 0 {
			return fmt.Errorf("launcher Pods %d, %v", len(pods), err)
		}
		for _, s := range pods[0].Status.ContainerStatuses {
			if s.Name == "volumeroot" && s.State.Waiting != nil &&
				(s.State.Waiting.Reason == "ErrImagePull" || s.State.Waiting.Reason == "ImagePullBackOff") {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", pods[0].Status.ContainerStatuses)
	})
}
