package module

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/prometheus"
)

// checkTargetsFollowRestarts deletes the Pod of a scraped component (virtualization-controller,
// one replica): its Deployment starts another with a new address, and Prometheus scrapes that one
// and no longer the old, with nothing run again (prometheus-sd rewrites the targets file).
func checkTargetsFollowRestarts(t *testing.T, ctx context.Context, st *stack, prom prometheus.Client) {
	t.Helper()
	t.Log("Prometheus follows a restarted Pod: its new address becomes a target that is up")
	const svc, endpoint = "virtualization-controller-metrics", "https-metrics"
	old := upTarget(t, ctx, prom, svc, endpoint, "")
	if err := st.kube.CoreV1().Pods(module.Namespace).Delete(ctx, old.Labels["pod"], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now := upTarget(t, ctx, prom, svc, endpoint, old.Labels["pod"])
	t.Logf("after %s: %s/%s is up at %s (pod %s), was %s (pod %s)", time.Since(start).Round(time.Second), svc, endpoint,
		now.ScrapeURL, now.Labels["pod"], old.ScrapeURL, old.Labels["pod"])
	for _, tg := range mustTargets(t, ctx, prom) {
		if tg.Labels["pod"] == old.Labels["pod"] {
			t.Errorf("the deleted pod %s is still a target: %s %s", old.Labels["pod"], tg.ScrapeURL, tg.Health)
		}
	}
}

// upTarget waits until svc/endpoint has exactly one target, up, of a pod other than notPod.
func upTarget(t *testing.T, ctx context.Context, prom prometheus.Client, svc, endpoint, notPod string) prometheus.Target {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var found []prometheus.Target
		for _, tg := range mustTargets(t, ctx, prom) {
			if tg.Labels["service"] == svc && tg.Labels["endpoint"] == endpoint {
				found = append(found, tg)
			}
		}
		if len(found) == 1 && found[0].Health == "up" && found[0].Labels["pod"] != notPod {
			return found[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: targets %+v, want one up of a pod other than %q", svc, endpoint, found, notPod)
		}
		time.Sleep(2 * time.Second)
	}
}

func mustTargets(t *testing.T, ctx context.Context, prom prometheus.Client) []prometheus.Target {
	t.Helper()
	targets, err := prom.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return targets
}
