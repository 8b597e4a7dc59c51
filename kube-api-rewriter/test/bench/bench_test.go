// Package bench measures the rewriting proxy against a plain httputil.ReverseProxy in front of
// the same in-memory fake apiserver, side by side in one run, so that the ratio shows the cost of
// the rewriting alone. Run with:
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
func fakeAPIServer() *httptest.Server {
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
	return httptest.NewServer(mux)
}

type env struct {
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
		up := fakeAPIServer()
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

// result of one side, for the ratio printed after both ran.
type result struct{ p50, p99, mean float64 }

// latency runs one request per iteration and reports its percentiles.
func latency(b *testing.B, e *env, side string, path func(string) string) result {
	url := e.servers[side].URL + path(side)
	e.get(b, url) // warm the connections
	d := make([]time.Duration, 0, b.N)
	bytes := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		bytes = e.get(b, url)
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	b.SetBytes(int64(bytes))
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	r := result{p50: float64(d[len(d)/2]), p99: float64(d[len(d)*99/100]), mean: float64(sum) / float64(len(d))}
	b.ReportMetric(r.p50, "p50-ns")
	b.ReportMetric(r.p99, "p99-ns")
	return r
}

// sideBySide runs the plain proxy and the rewriter in one benchmark and prints their ratio (on
// stdout: a parent benchmark's own log is not shown).
func sideBySide(b *testing.B, what string, run func(b *testing.B, side string) result) {
	res := map[string]result{}
	for _, side := range []string{"plain", "rewriter"} {
		b.Run(side, func(b *testing.B) { res[side] = run(b, side) })
	}
	p, r := res["plain"], res["rewriter"]
	if p.p50 == 0 {
		return
	}
	fmt.Printf("RATIO %s p50: plain %.1f µs, rewriter %.1f µs: ratio %.2fx, +%.1f µs; p99 ratio %.2fx",
		what, p.p50/1e3, r.p50/1e3, r.p50/p.p50, (r.p50-p.p50)/1e3, r.p99/p.p99)
	fmt.Println()
}

func BenchmarkGET(b *testing.B) {
	e := setup(b)
	sideBySide(b, "GET VirtualMachine", func(b *testing.B, side string) result {
		return latency(b, e, side, func(s string) string { return paths[s].get })
	})
}

func BenchmarkLIST(b *testing.B) {
	e := setup(b)
	sideBySide(b, fmt.Sprintf("LIST %d pods", listPods), func(b *testing.B, side string) result {
		return latency(b, e, side, func(s string) string { return paths[s].list })
	})
}

// BenchmarkWatch streams 10,000 events per iteration; p50 here is the time per event.
func BenchmarkWatch(b *testing.B) {
	e := setup(b)
	sideBySide(b, fmt.Sprintf("watch of %d events, per event", watchEvents), func(b *testing.B, side string) result {
		url := e.servers[side].URL + paths[side].watch + "&events=" + strconv.Itoa(watchEvents)
		var bytes int
		var total time.Duration
		per := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
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
				bytes += len(sc.Bytes()) + 1
			}
			resp.Body.Close()
			if sc.Err() != nil || n != watchEvents {
				b.Fatalf("received %d events (%v), want %d", n, sc.Err(), watchEvents)
			}
			d := time.Since(t0)
			total += d
			per = append(per, d/watchEvents)
		}
		b.StopTimer()
		b.SetBytes(int64(bytes / b.N))
		slices.Sort(per)
		r := result{p50: float64(per[len(per)/2]), p99: float64(per[len(per)-1]), mean: float64(total) / float64(b.N*watchEvents)}
		b.ReportMetric(r.mean, "ns/event")
		return r
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

// BenchmarkWatchMemory: the heap with 100 idle watches open minus the heap with 1 open, per
// watch. The whole process is measured (client, proxy and fake apiserver), so the plain proxy's
// figure is the baseline and the difference is the rewriter's own cost per watch.
func BenchmarkWatchMemory(b *testing.B) {
	e := setup(b)
	res := map[string]float64{}
	for _, side := range []string{"plain", "rewriter"} {
		b.Run(side, func(b *testing.B) {
			var perWatch float64
			for i := 0; i < b.N; i++ {
				one := openWatches(b, e, side, 1)
				h1 := heapAfterGC()
				more := openWatches(b, e, side, 99)
				h100 := heapAfterGC()
				for _, c := range append(one, more...) {
					c.Close()
				}
				perWatch += (float64(h100) - float64(h1)) / 99
			}
			res[side] = perWatch / float64(b.N)
			b.ReportMetric(res[side], "bytes/watch")
			b.ReportMetric(0, "ns/op")
		})
	}
	fmt.Printf("RATIO heap per idle watch (1 -> 100 open): plain %.0f B, rewriter %.0f B: +%.0f B per watch for the rewriter",
		res["plain"], res["rewriter"], res["rewriter"]-res["plain"])
	fmt.Println()
}
