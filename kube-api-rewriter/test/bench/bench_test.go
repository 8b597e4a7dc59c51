// Package bench measures the rewriting proxy against a plain httputil.ReverseProxy in front of
// the same in-memory fake apiserver, in turns in one run, so that the difference shows the cost of
// the rewriting alone, and prints it next to the performance target (lines starting with TARGET).
// Run with:
//
//	go test -run '^$' -bench . -benchmem ./test/bench/
package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/proxy"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kube-api-rewriter/pkg/transport"
)

const (
	ig = "internal.virtualization.deckhouse.io"
	ik = "kubevirt.internal.virtualization.deckhouse.io"

	listPods    = 200
	watchEvents = 10000
	watchStep   = 100 // idle watches opened per step of BenchmarkWatchMemory
)

// What each proxy's client asks for: the rewriter's speaks kubevirt.io, the plain proxy's asks
// the cluster's names directly. Both reach the same upstream handler and the same bytes.
var paths = map[string]struct{ get, list, watch string }{
	"plain": {
		get:   "/apis/" + ig + "/v1/namespaces/default/internalvirtualizationvirtualmachines/vm-1",
		list:  "/api/v1/namespaces/default/pods",
		watch: "/apis/" + ig + "/v1/namespaces/default/internalvirtualizationvirtualmachines?watch=true",
	},
	"rewriter": {
		get:   "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm-1",
		list:  "/api/v1/namespaces/default/pods",
		watch: "/apis/kubevirt.io/v1/namespaces/default/virtualmachines?watch=true",
	},
}

// vm is a KubeVirt VirtualMachine in the cluster's view, about 2 KB, as virt-controller reads it.
func vm(i int) map[string]any {
	name := fmt.Sprintf("vm-%d", i)
	return map[string]any{
		"apiVersion": ig + "/v1", "kind": "InternalVirtualizationVirtualMachine",
		"metadata": map[string]any{
			"name": name, "namespace": "default", "uid": fmt.Sprintf("3b0b1c2d-0000-4000-8000-%012d", i),
			"resourceVersion": strconv.Itoa(1000 + i), "generation": 2, "creationTimestamp": "2025-01-01T00:00:00Z",
			"labels":      map[string]any{ik + "/vm": name, "app": "demo", "vm.kubevirt.internal.virtualization.deckhouse.io/name": name},
			"annotations": map[string]any{ik + "/latest-observed-api-version": "v1", ik + "/storage-observed-api-version": "v1"},
			"finalizers":  []any{ik + "/virtualMachineControllerFinalize"},
			"ownerReferences": []any{map[string]any{"apiVersion": "virtualization.deckhouse.io/v1alpha2", "kind": "VirtualMachine",
				"name": name, "uid": "6f1c8a3e-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}},
		},
		"spec": map[string]any{
			"runStrategy": "Always",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{ik + "/vm": name, "vm.kubevirt.internal.virtualization.deckhouse.io/name": name}},
				"spec": map[string]any{
					"domain": map[string]any{
						"cpu":      map[string]any{"cores": 2, "sockets": 1, "model": "host-model"},
						"memory":   map[string]any{"guest": "2Gi"},
						"devices":  map[string]any{"disks": []any{map[string]any{"name": "root", "disk": map[string]any{"bus": "virtio"}}}, "interfaces": []any{map[string]any{"name": "default", "masquerade": map[string]any{}}}},
						"features": map[string]any{"acpi": map[string]any{}, "smm": map[string]any{"enabled": true}},
						"firmware": map[string]any{"bootloader": map[string]any{"efi": map[string]any{"secureBoot": false}}},
					},
					"networks":     []any{map[string]any{"name": "default", "pod": map[string]any{}}},
					"volumes":      []any{map[string]any{"name": "root", "persistentVolumeClaim": map[string]any{"claimName": name + "-root"}}},
					"nodeSelector": map[string]any{ik + "/schedulable": "true", "cpu-model.node.virtualization.deckhouse.io/Haswell": "true"},
				},
			},
		},
		"status": map[string]any{"created": true, "ready": true, "printableStatus": "Running",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:10Z"}}},
	}
}

// pod is a virt-launcher pod in the cluster's view, about 5 KB.
func pod(i int) map[string]any {
	name := fmt.Sprintf("vm-%d", i)
	uid := fmt.Sprintf("6f1c8a3e-0000-4000-8000-%012d", i)
	env := []any{}
	for j := 0; j < 20; j++ {
		env = append(env, map[string]any{"name": fmt.Sprintf("ENV_%d", j), "value": fmt.Sprintf("value-%d-%s", j, name)})
	}
	return map[string]any{
		"metadata": map[string]any{
			"name": "virt-launcher-" + name + "-abcde", "namespace": "default", "uid": uid, "resourceVersion": strconv.Itoa(5000 + i),
			"labels": map[string]any{ik: "virt-launcher", ik + "/created-by": uid, ik + "/nodeName": "node-1",
				"vm.kubevirt.internal.virtualization.deckhouse.io/name": name, "app.kubernetes.io/managed-by": "virt-operator-internal-virtualization"},
			"annotations": map[string]any{ik + "/domain": name, "kubectl.kubernetes.io/default-container": "compute",
				"pre.hook.backup.velero.io/command": `["/usr/bin/virt-freezer", "--freeze", "--name", "` + name + `"]`},
			"finalizers": []any{ik + "/virtualMachineControllerFinalize"},
			"ownerReferences": []any{map[string]any{"apiVersion": ig + "/v1", "kind": "InternalVirtualizationVirtualMachineInstance",
				"name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}},
			"managedFields": []any{map[string]any{"manager": "virt-controller", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:" + ik: map[string]any{}}}}}},
		},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "compute", "image": "registry.example.com/virt-launcher@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				"command": []any{"/usr/bin/virt-launcher-monitor", "--qemu-timeout", "321s", "--name", name, "--uid", uid, "--namespace", "default"},
				"env":     env, "resources": map[string]any{"limits": map[string]any{"devices.kubevirt.io/kvm": "1"}, "requests": map[string]any{"cpu": "100m", "memory": "1294Mi"}}}},
			"nodeSelector": map[string]any{ik + "/schedulable": "true", "cpu-model.node.virtualization.deckhouse.io/Haswell": "true"},
			"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
				map[string]any{"matchExpressions": []any{map[string]any{"key": ik + "/schedulable", "operator": "In", "values": []any{"true"}}}}}}}},
		},
		"status": map[string]any{"phase": "Running", "podIP": fmt.Sprintf("10.66.%d.%d", i/250, i%250+2), "hostIP": "192.168.0.10"},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// fakeAPIServer serves a VM, a pod list and VM watches in the cluster's view.
func fakeAPIServer() (*httptest.Server, []byte) {
	vmBody := mustJSON(vm(1))
	items := make([]any, listPods)
	for i := range items {
		items[i] = pod(i)
	}
	listBody := mustJSON(map[string]any{"kind": "PodList", "apiVersion": "v1", "metadata": map[string]any{"resourceVersion": "9999"}, "items": items})
	events := make([][]byte, 16)
	for i := range events {
		events[i] = append(mustJSON(map[string]any{"type": "MODIFIED", "object": vm(i)}), '\n')
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/"+ig+"/v1/namespaces/default/internalvirtualizationvirtualmachines/vm-1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(vmBody)))
		w.Write(vmBody)
	})
	mux.HandleFunc("/api/v1/namespaces/default/pods", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(listBody) // large: chunked, as the apiserver sends lists
	})
	mux.HandleFunc("/apis/"+ig+"/v1/namespaces/default/internalvirtualizationvirtualmachines", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		if r.URL.Query().Get("hold") != "" {
			// An idle watch: one event, then nothing until the client leaves.
			w.Write(events[0])
			f.Flush()
			<-r.Context().Done()
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("events"))
		for i := 0; i < n; i++ {
			if _, err := w.Write(events[i%len(events)]); err != nil {
				return
			}
			f.Flush() // the apiserver flushes every event
		}
	})
	return httptest.NewServer(mux), listBody
}

type env struct {
	listBody []byte
	upstream *httptest.Server
	servers  map[string]*httptest.Server // "plain", "rewriter"
	client   *http.Client
}

var (
	envOnce sync.Once
	shared  *env
)

// setup starts the fake apiserver and both proxies once for all benchmarks.
func setup(b *testing.B) *env {
	envOnce.Do(func() {
		up, listBody := fakeAPIServer()
		u, _ := url.Parse(up.URL)
		newUpstreamTransport := func() *http.Transport {
			return &http.Transport{MaxIdleConnsPerHost: 256, ForceAttemptHTTP2: false}
		}
		plain := &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Host = u.Host },
			Transport:     newUpstreamTransport(),
			FlushInterval: -1,
		}
		engine := transport.New(newUpstreamTransport(), transport.Options{
			Rewriter: rewrite.New(rules.Default()), Metrics: metrics.New(), Listener: "api",
		})
		rw := proxy.NewAPI(u, engine, slog.New(slog.DiscardHandler))
		shared = &env{
			listBody: listBody,
			upstream: up,
			servers:  map[string]*httptest.Server{"plain": httptest.NewServer(plain), "rewriter": httptest.NewServer(rw)},
			client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}},
		}
	})
	return shared
}

func (e *env) get(b *testing.B, url string) int {
	resp, err := e.client.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return int(n)
}

// The plain proxy and the rewriter are measured in turns: every iteration makes one request (or
// one watch) through each, the order swapped every time. On a machine shared with other jobs the
// load then falls on both alike, and the difference between them is the rewriter's.
var sides = [2]string{"plain", "rewriter"}

// inTurns runs op for both sides b.N times in turns and returns the durations of each side.
func inTurns(b *testing.B, op func(b *testing.B, side string) time.Duration) [2][]time.Duration {
	op(b, sides[0]) // warm the connections
	op(b, sides[1])
	var d [2][]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			s := (i + k) % 2
			d[s] = append(d[s], op(b, sides[s]))
		}
	}
	b.StopTimer()
	return d
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

// goal is a performance target for the rewriter's p50: at most extra over the plain proxy, and,
// when ratio is set, at most ratio times the plain proxy's p50.
type goal struct {
	extra time.Duration
	ratio float64
}

func (g goal) String() string {
	if g.ratio > 0 {
		return fmt.Sprintf("<= +%v and <= %.2fx", g.extra, g.ratio)
	}
	return fmt.Sprintf("<= +%v", g.extra)
}

func (g goal) met(plain, rewriter time.Duration) bool {
	return rewriter-plain <= g.extra && (g.ratio == 0 || float64(rewriter) <= g.ratio*float64(plain))
}

// compare runs op in turns and prints the p50 of both sides and the rewriter's extra time next to
// the target for it (on stdout: a parent benchmark's own log is not shown). The last run of the
// sub-benchmark, the one with the most iterations, is what is printed.
func compare(b *testing.B, what string, target goal, op func(b *testing.B, side string) time.Duration) {
	var d [2][]time.Duration
	b.Run("turns", func(b *testing.B) {
		d = inTurns(b, op)
		p := [2]time.Duration{percentile(d[0], 0.5), percentile(d[1], 0.5)}
		b.ReportMetric(float64(p[0]), "plain-p50-ns")
		b.ReportMetric(float64(p[1]), "rewriter-p50-ns")
		b.ReportMetric(float64(p[1]-p[0]), "extra-p50-ns")
	})
	if len(d[0]) == 0 {
		return
	}
	p50 := [2]time.Duration{percentile(d[0], 0.5), percentile(d[1], 0.5)}
	p99 := [2]time.Duration{percentile(d[0], 0.99), percentile(d[1], 0.99)}
	extra := p50[1] - p50[0]
	fmt.Printf("TARGET %s p50: plain %v, rewriter %v: %s (target %v: %s), ratio %.2fx; p99 ratio %.2fx; %d turns\n",
		what, round(p50[0]), round(p50[1]), signed(round(extra)), target, verdict(target.met(p50[0], p50[1])),
		float64(p50[1])/float64(p50[0]), float64(p99[1])/float64(p99[0]), len(d[0]))
}

func round(d time.Duration) time.Duration {
	if d > 100*time.Microsecond || d < -100*time.Microsecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}

func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// request times one GET and reads the whole answer.
func request(e *env, path func(string) string) func(b *testing.B, side string) time.Duration {
	return func(b *testing.B, side string) time.Duration {
		t0 := time.Now()
		e.get(b, e.servers[side].URL+path(side))
		return time.Since(t0)
	}
}

func BenchmarkGET(b *testing.B) {
	e := setup(b)
	compare(b, "GET VirtualMachine", goal{extra: time.Millisecond}, request(e, func(s string) string { return paths[s].get }))
}

func BenchmarkLIST(b *testing.B) {
	e := setup(b)
	compare(b, fmt.Sprintf("LIST %d pods (%d KB)", listPods, len(e.listBody)>>10), goal{extra: time.Millisecond, ratio: 1.2},
		request(e, func(s string) string { return paths[s].list }))
}

// BenchmarkRestoreListBody restores the LIST answer alone, in memory as the engine does: most of
// what the rewriter adds to a LIST.
func BenchmarkRestoreListBody(b *testing.B) {
	e := setup(b)
	rw := rewrite.New(rules.Default())
	dst := make([]byte, 0, 2*len(e.listBody))
	b.SetBytes(int64(len(e.listBody)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rw.AppendObject(rewrite.Restore, dst[:0], e.listBody, rewrite.Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWatch streams 10,000 events per turn; the times compared are per event.
func BenchmarkWatch(b *testing.B) {
	e := setup(b)
	compare(b, fmt.Sprintf("watch of %d events, per event", watchEvents), goal{extra: 3 * time.Microsecond}, func(b *testing.B, side string) time.Duration {
		url := e.servers[side].URL + paths[side].watch + "&events=" + strconv.Itoa(watchEvents)
		t0 := time.Now()
		resp, err := e.client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		n := 0
		for sc.Scan() {
			n++
		}
		resp.Body.Close()
		if sc.Err() != nil || n != watchEvents {
			b.Fatalf("received %d events (%v), want %d", n, sc.Err(), watchEvents)
		}
		return time.Since(t0) / watchEvents
	})
}

// heapAfterGC is the live heap, the measure of what open watches hold.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// openWatches opens n idle watches and waits for the first event of each, so that every
// stage of every stream is up.
func openWatches(b *testing.B, e *env, side string, n int) []io.Closer {
	url := e.servers[side].URL + paths[side].watch + "&hold=1"
	out := make([]io.Closer, 0, n)
	for i := 0; i < n; i++ {
		resp, err := e.client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.Contains(line, "MODIFIED") {
			b.Fatalf("watch %d: %q %v", i, line, err)
		}
		out = append(out, resp.Body)
	}
	return out
}

// BenchmarkWatchMemory: the heap per idle watch, from 1 to 101 open watches and from 101 to 201.
// The whole process is measured (client, proxy and fake apiserver), so the plain proxy's figure
// is the baseline and the difference is the rewriter's own cost per watch; the same cost for the
// first and the next hundred says that it does not grow with the number of watches (the heap
// figures move by a few KB per watch from run to run: the verdict allows for that).
func BenchmarkWatchMemory(b *testing.B) {
	e := setup(b)
	res := map[string][2]float64{}
	for _, side := range sides {
		b.Run(side, func(b *testing.B) {
			var per [2]float64
			for i := 0; i < b.N; i++ {
				open := openWatches(b, e, side, 1)
				h := [3]uint64{heapAfterGC()}
				for k := 1; k <= 2; k++ {
					open = append(open, openWatches(b, e, side, watchStep)...)
					h[k] = heapAfterGC()
					per[k-1] += (float64(h[k]) - float64(h[k-1])) / watchStep
				}
				for _, c := range open {
					c.Close()
				}
			}
			per[0] /= float64(b.N)
			per[1] /= float64(b.N)
			res[side] = per
			b.ReportMetric((per[0]+per[1])/2, "bytes/watch")
			b.ReportMetric(0, "ns/op")
		})
	}
	p, r := res["plain"], res["rewriter"]
	first, next := r[0]-p[0], r[1]-p[1]
	flat := next <= max(first, 0)*1.5+4096
	fmt.Printf("TARGET heap per idle watch: plain %.0f B, rewriter %.0f B: %+.0f B per watch for the rewriter "+
		"(%+.0f B for watches 2-%d, %+.0f B for the next %d: target flat in the number of watches: %s)\n",
		(p[0]+p[1])/2, (r[0]+r[1])/2, (first+next)/2, first, watchStep+1, next, watchStep, verdict(flat))
}
