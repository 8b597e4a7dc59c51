package module

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
)

// dvcrGCRequestedAt is virtualization-controller's stamp on DVCR's pod template
// (dvcrgc.AnnotationRequestedAt): when it last asked for a garbage collection.
const dvcrGCRequestedAt = "virtualization.deckhouse.io/dvcr-gc-requested-at"

// checkDVCRGarbageCollection sets a garbage collection of DVCR every 30 seconds: with no import
// running, virtualization-controller stamps DVCR's pod template and the pod is replaced, whose gc
// init container (the registry's garbage-collect) ends well. The schedule is then taken away
// again, and DVCR gets ready (the upgrade waits for it) and stays.
func checkDVCRGarbageCollection(t *testing.T, ctx context.Context, st *stack, set ...string) {
	t.Helper()
	t.Log("helm upgrade --set dvcr.gc.schedule='@every 30s': virtualization-controller restarts DVCR, whose gc init container collects")
	if err := st.c.Install(ctx, append(set, "dvcr.gc.schedule=@every 30s")...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for !collected(t, ctx, st) {
		if time.Now().After(deadline) {
			d, err := st.kube.AppsV1().Deployments(module.Namespace).Get(ctx, "dvcr", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Fatalf("no DVCR pod restarted for a collection whose gc init container ended within 4 minutes; the pod template's annotations: %v", d.Spec.Template.Annotations)
		}
		time.Sleep(time.Second)
	}
	t.Log("helm upgrade --set dvcr.gc.schedule='': no more scheduled collections, DVCR ready")
	if err := st.c.Install(ctx, append(set, "dvcr.gc.schedule=")...); err != nil {
		t.Fatal(err)
	}
}

// collected says whether a DVCR pod stamped for a collection has seen its gc init container end
// (and fails the test if it ended badly).
func collected(t *testing.T, ctx context.Context, st *stack) bool {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !owned(&p, "dvcr") || p.Annotations[dvcrGCRequestedAt] == "" {
			continue
		}
		for _, c := range p.Status.InitContainerStatuses {
			if c.Name != "gc" || c.State.Terminated == nil {
				continue
			}
			if c.State.Terminated.ExitCode != 0 {
				t.Fatalf("DVCR's gc init container in %s ended %d: %s", p.Name, c.State.Terminated.ExitCode, c.State.Terminated.Message)
			}
			return true
		}
	}
	return false
}
