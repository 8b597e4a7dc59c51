package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// densityVMs is how many VMs BenchmarkVMStartDensity creates at once.
const densityVMs = 10

// BenchmarkVMStartDensity creates densityVMs small VMs at once on the shared cluster (two local nodes) and reports the
// create-to-Running latency (p50, p95) and the API writes each VMI start costs, counted from the
// apiserver's own request metrics. Run it with `make bench-vms`.
func BenchmarkVMStartDensity(b *testing.B) {
	c := startCluster(b)
	// Ten pollers at once would wait on client-side throttling and blur the latencies.
	c.rest.QPS, c.rest.Burst = 200, 400
	kc := kubevirtClient(b, c)
	admin, err := c.stack.RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("density-%d", i)
		if out, err := testenv.KubectlInput(b, c.stack.KubeconfigPath(), "", "create", "namespace", ns); err != nil {
			b.Fatalf("namespace: %v\n%s", err, out)
		}
		before, err := writeCounts(ctx, kube)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		lat := make([]time.Duration, densityVMs)
		errs := make([]error, densityVMs)
		start := time.Now()
		for j := 0; j < densityVMs; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("vm-%d", j)
				if err := kc.Create(ctx, newVM(ns, name)); err != nil {
					errs[j] = err
					return
				}
				errs[j] = waitPhase(ctx, kc, ns, name, 8*time.Minute)
				lat[j] = time.Since(start)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		after, err := writeCounts(ctx, kube)
		if err != nil {
			b.Fatal(err)
		}
		sort.Slice(lat, func(x, y int) bool { return lat[x] < lat[y] })
		p50, p95 := lat[len(lat)/2], lat[(len(lat)*95+99)/100-1]
		b.ReportMetric(p50.Seconds(), "p50-s")
		b.ReportMetric(p95.Seconds(), "p95-s")
		vmiWrites := float64(after.vmi-before.vmi) / densityVMs
		allWrites := float64(after.all()-before.all()) / densityVMs
		b.ReportMetric(vmiWrites, "vmi-writes/start")
		b.ReportMetric(allWrites, "vm+vmi+pod-writes/start")
		b.Logf("%d VMs at once under TCG: create-to-Running p50 %.1fs p95 %.1fs (target: p50 well under 15-25 s); "+
			"API writes per VMI start: %.1f on the VMI, %.1f on VM+VMI+Pod (target: about 9 or fewer)",
			densityVMs, p50.Seconds(), p95.Seconds(), vmiWrites, allWrites)
		if out, err := testenv.KubectlInput(b, c.kubevirt, "", "delete", "vm", "--all", "-n", ns, "--wait=true", "--timeout=5m"); err != nil {
			b.Fatalf("delete VMs: %v\n%s", err, out)
		}
	}
}

// waitPhase waits until the VM's VMI runs.
func waitPhase(ctx context.Context, kc client.Client, ns, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi)
		if err == nil && vmi.Status.Phase == kubevirtv1.Running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("VM %s/%s not running after %s (phase %q, %v)", ns, name, timeout, vmi.Status.Phase, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// writes counts the apiserver's successful and failed write requests by resource.
type writes struct{ vmi, vm, pod int }

func (w writes) all() int { return w.vmi + w.vm + w.pod }

// writeCounts reads apiserver_request_total for writes (POST, PUT, PATCH, DELETE) on the
// renamed VM and VMI resources and on Pods, subresources included.
func writeCounts(ctx context.Context, kube kubernetes.Interface) (writes, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return writes{}, fmt.Errorf("apiserver metrics: %w", err)
	}
	families, err := parseMetrics(bytes.NewReader(raw))
	if err != nil {
		return writes{}, fmt.Errorf("apiserver metrics: %w", err)
	}
	requests := families["apiserver_request_total"]
	count := func(resource string) int {
		var n float64
		for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "APPLY"} {
			n += sampleValue(requests, map[string]string{"verb": verb, "resource": resource})
		}
		return int(n)
	}
	return writes{
		vmi: count("internalvirtualizationvirtualmachineinstances"),
		vm:  count("internalvirtualizationvirtualmachines"),
		pod: count("pods"),
	}, nil
}
