package module

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/release"
)

// launcherPod is the VMI's launcher Pod (the one the VMI controls) in the default namespace.
func launcherPod(t *testing.T, ctx context.Context, st *stack, vmiUID string) *corev1.Pod {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && string(ref.UID) == vmiUID {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no launcher Pod controlled by VMI %s", vmiUID)
	return nil
}

// checkStillRunning checks what an upgrade from the previous release promises a running VM: the
// same VMI in the same launcher Pod, which never restarted and still runs the previous release's
// launcher, while every component of the module now runs this checkout's images; and the
// guest's console answers through the upgraded components.
func checkStillRunning(t *testing.T, ctx context.Context, st *stack, vmiUID string, before *corev1.Pod) {
	t.Helper()
	if got := st.kubectl(t, st.kubevirt, "get", "vm/demo", "-o", "jsonpath={.status.printableStatus}"); got != "Running" {
		t.Fatalf("VM after the upgrade: %s", got)
	}
	if got := st.kubectl(t, st.kubevirt, "get", "vmi/demo", "-o", "jsonpath={.metadata.uid}"); got != vmiUID {
		t.Fatalf("VMI after the upgrade: uid %q, was %q", got, vmiUID)
	}
	after := launcherPod(t, ctx, st, vmiUID)
	if after.UID != before.UID {
		t.Fatalf("launcher Pod after the upgrade: %s, was %s", after.UID, before.UID)
	}
	for _, cs := range after.Status.ContainerStatuses {
		if cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("launcher container %s after the upgrade: %d restarts, state %+v", cs.Name, cs.RestartCount, cs.State)
		}
	}
	compute := container(after.Spec, "compute")
	if tag := nodeagent.ImageTag(compute.Image); tag != release.Previous.Version {
		t.Errorf("the running VM's launcher image %q: want the previous release's tag %s", compute.Image, release.Previous.Version)
	}
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Spec.Containers {
			if strings.HasPrefix(c.Name, "kube-rbac-proxy") {
				continue
			}
			if nodeagent.ImageTag(c.Image) == release.Previous.Version {
				t.Errorf("pod %s container %s still runs the previous release's image %s", p.Name, c.Name, c.Image)
			}
		}
	}
	checkConsoleAnswers(t, ctx, st, "demo")
}

// checkConsoleAnswers types a command into the core VM's serial console and waits for its answer.
func checkConsoleAnswers(t *testing.T, ctx context.Context, st *stack, vm string) {
	t.Helper()
	con := openConsole(t, ctx, st.kubevirt, vm)
	defer con.Close()
	if err := con.Write("echo answer-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`answer-42`), 30*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
}
