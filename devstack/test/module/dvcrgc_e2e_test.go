package module

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
)

// dvcrGCRequestedAt is virtualization-controller's stamp on DVCR's pod template
// (dvcrgc.AnnotationRequestedAt): when it last asked for a garbage collection.
const dvcrGCRequestedAt = "virtualization.deckhouse.io/dvcr-gc-requested-at"

// checkDVCRGarbageCollection sets a garbage collection of DVCR every 30 seconds: with no import
// running, virtualization-controller stamps DVCR's pod template, the pod is replaced, the new
// pod's gc init container (the registry's garbage-collect) ends well and its registries get
// ready. It is the module e2e's last check: DVCR keeps restarting after it.
func checkDVCRGarbageCollection(t *testing.T, ctx context.Context, st *stack, set ...string) {
	t.Helper()
	t.Log("helm upgrade --set dvcr.gc.schedule='@every 30s': virtualization-controller restarts DVCR, whose gc init container collects")
	if err := st.c.Install(ctx, append(set, "dvcr.gc.schedule=@every 30s")...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Minute)
	var stamp string
	for stamp == "" {
		d, err := st.kube.AppsV1().Deployments(module.Namespace).Get(ctx, "dvcr", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stamp = d.Spec.Template.Annotations[dvcrGCRequestedAt]
		if stamp == "" && time.Now().After(deadline) {
			t.Fatalf("virtualization-controller did not ask for DVCR's garbage collection within 4 minutes; its pod template: %v", d.Spec.Template.Annotations)
		}
		time.Sleep(2 * time.Second)
	}
	for {
		pod, ok := dvcrPod(t, ctx, st, stamp)
		if ok {
			var gc *corev1.ContainerStatus
			for i := range pod.Status.InitContainerStatuses {
				if pod.Status.InitContainerStatuses[i].Name == "gc" {
					gc = &pod.Status.InitContainerStatuses[i]
				}
			}
			if gc != nil && gc.State.Terminated != nil && gc.State.Terminated.ExitCode != 0 {
				t.Fatalf("DVCR's gc init container ended %d: %s", gc.State.Terminated.ExitCode, gc.State.Terminated.Message)
			}
			if gc != nil && gc.State.Terminated != nil && ready(pod) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready DVCR pod of the collection asked for at %s whose gc init container ended", stamp)
		}
		time.Sleep(time.Second)
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// dvcrPod is DVCR's pod stamped with the collection asked for at stamp, if there is one.
func dvcrPod(t *testing.T, ctx context.Context, st *stack, stamp string) (*corev1.Pod, bool) {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pods.Items {
		if owned(&p, "dvcr") && p.Annotations[dvcrGCRequestedAt] == stamp && !strings.HasPrefix(string(p.Status.Phase), "Fail") {
			return &pods.Items[i], true
		}
	}
	return nil, false
}
