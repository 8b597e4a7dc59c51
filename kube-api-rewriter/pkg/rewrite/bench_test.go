package rewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// launcherPod builds a realistic virt-launcher pod in the cluster view (renamed
// keys, renamed owner) of about 13 KB.
func launcherPod(i int) map[string]any {
	name := fmt.Sprintf("vm-%05d", i)
	uid := fmt.Sprintf("6f1c8a3e-0000-4000-8000-%012d", i)
	ip := fmt.Sprintf("10.66.%d.%d", i/250, i%250+2)
	k := "kubevirt.internal.virtualization.deckhouse.io"
	labels := map[string]any{
		k:                 "virt-launcher",
		k + "/created-by": uid,
		k + "/nodeName":   "node-1",
		"vm.kubevirt.internal.virtualization.deckhouse.io/name": name,
		k + "/domain":                  name,
		k + "/size":                    "small",
		"app.kubernetes.io/managed-by": "virt-operator-internal-virtualization",
		"app":                          "demo",
	}
	ann := map[string]any{
		k + "/domain":                                        name,
		k + "/migrationTransportUnix":                        "true",
		"kubectl.kubernetes.io/default-container":            "compute",
		"post.hook.backup.velero.io/command":                 `["/usr/bin/virt-freezer", "--unfreeze", "--name", "` + name + `", "--namespace", "default"]`,
		"pre.hook.backup.velero.io/command":                  `["/usr/bin/virt-freezer", "--freeze", "--name", "` + name + `", "--namespace", "default"]`,
		k + "/vm-generation":                                 "1",
		"descheduler.alpha.kubernetes.io/request-evict-only": "",
	}
	env := []any{}
	for j := 0; j < 50; j++ {
		env = append(env, map[string]any{"name": fmt.Sprintf("ENV_%d", j), "value": fmt.Sprintf("value-%d-%s", j, name)})
	}
	mounts := []any{}
	vols := []any{}
	for j := 0; j < 10; j++ {
		mounts = append(mounts, map[string]any{"name": fmt.Sprintf("vol-%d", j), "mountPath": fmt.Sprintf("/var/run/kubevirt-private/vol-%d", j)})
		vols = append(vols, map[string]any{"name": fmt.Sprintf("vol-%d", j), "emptyDir": map[string]any{}})
	}
	container := func(n string) map[string]any {
		return map[string]any{
			"name": n, "image": "registry.example.com/virt-launcher@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			"command":                []any{"/usr/bin/virt-launcher-monitor", "--qemu-timeout", "321s", "--name", name, "--uid", uid, "--namespace", "default", "--kubevirt-share-dir", "/var/run/kubevirt", "--ephemeral-disk-dir", "/var/run/kubevirt-ephemeral-disks", "--container-disk-dir", "/var/run/kubevirt/container-disks", "--grace-period-seconds", "45", "--hook-sidecars", "0", "--ovmf-path", "/usr/share/OVMF"},
			"env":                    env,
			"resources":              map[string]any{"limits": map[string]any{"devices.kubevirt.io/kvm": "1", "devices.kubevirt.io/tun": "1"}, "requests": map[string]any{"cpu": "100m", "memory": "1294Mi", "ephemeral-storage": "50M"}},
			"volumeMounts":           mounts,
			"securityContext":        map[string]any{"capabilities": map[string]any{"add": []any{"NET_BIND_SERVICE", "SYS_NICE"}, "drop": []any{"NET_RAW"}}, "privileged": false, "runAsUser": 107},
			"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
		}
	}
	fields := map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:" + k: map[string]any{}, "f:" + k + "/created-by": map[string]any{}}, "f:ownerReferences": map[string]any{".": map[string]any{}, `k:{"uid":"` + uid + `"}`: map[string]any{}}},
		"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"compute"}`: map[string]any{".": map[string]any{}, "f:command": map[string]any{}, "f:env": map[string]any{}, "f:image": map[string]any{}, "f:resources": map[string]any{}}}}}
	return map[string]any{
		"metadata": map[string]any{
			"name": "virt-launcher-" + name + "-abcde", "generateName": "virt-launcher-" + name + "-", "namespace": "default",
			"uid": uid, "resourceVersion": fmt.Sprint(100000 + i), "creationTimestamp": "2025-01-01T00:00:00Z",
			"labels": labels, "annotations": ann,
			"finalizers": []any{k + "/virtualMachineControllerFinalize"},
			"ownerReferences": []any{map[string]any{"apiVersion": "internal.virtualization.deckhouse.io/v1", "kind": "InternalVirtualizationVirtualMachineInstance",
				"name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}},
			"managedFields": []any{
				map[string]any{"manager": "virt-controller", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields},
				map[string]any{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2025-01-01T00:00:10Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:status": map[string]any{"f:conditions": map[string]any{}, "f:podIP": map[string]any{}}}, "subresource": "status"},
			},
		},
		"spec": map[string]any{
			"volumes":                       vols,
			"containers":                    []any{container("compute"), container("guest-console-log")},
			"restartPolicy":                 "Never",
			"terminationGracePeriodSeconds": 60,
			"dnsPolicy":                     "ClusterFirst",
			"nodeSelector":                  map[string]any{k + "/schedulable": "true", "cpu-model.node.virtualization.deckhouse.io/Haswell-noTSX": "true", "kubernetes.io/arch": "amd64"},
			"serviceAccountName":            "default",
			"nodeName":                      "node-1",
			"hostname":                      name,
			"securityContext":               map[string]any{"runAsUser": 107, "runAsGroup": 107, "fsGroup": 107},
			"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
				map[string]any{"matchExpressions": []any{map[string]any{"key": "node-labeller.virtualization.deckhouse.io/obsolete-host-model", "operator": "DoesNotExist"}}}}}}},
			"schedulerName": "default-scheduler",
			"tolerations":   []any{map[string]any{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}},
			"priority":      0, "enableServiceLinks": false, "preemptionPolicy": "PreemptLowerPriority",
		},
		"status": map[string]any{
			"phase": "Running", "hostIP": "192.168.1.10", "podIP": ip, "podIPs": []any{map[string]any{"ip": ip}}, "qosClass": "Burstable",
			"startTime": "2025-01-01T00:00:01Z",
			"conditions": []any{
				map[string]any{"type": "Initialized", "status": "True", "lastProbeTime": nil, "lastTransitionTime": "2025-01-01T00:00:01Z"},
				map[string]any{"type": "Ready", "status": "True", "lastProbeTime": nil, "lastTransitionTime": "2025-01-01T00:00:05Z"},
				map[string]any{"type": "ContainersReady", "status": "True", "lastProbeTime": nil, "lastTransitionTime": "2025-01-01T00:00:05Z"},
				map[string]any{"type": "PodScheduled", "status": "True", "lastProbeTime": nil, "lastTransitionTime": "2025-01-01T00:00:00Z"},
			},
			"containerStatuses": []any{
				map[string]any{"name": "compute", "state": map[string]any{"running": map[string]any{"startedAt": "2025-01-01T00:00:03Z"}}, "ready": true, "restartCount": 0, "image": "registry.example.com/virt-launcher:v1.6.0", "imageID": "registry.example.com/virt-launcher@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "containerID": "containerd://" + uid + uid, "started": true},
				map[string]any{"name": "guest-console-log", "state": map[string]any{"running": map[string]any{"startedAt": "2025-01-01T00:00:03Z"}}, "ready": true, "restartCount": 0, "image": "registry.example.com/virt-launcher:v1.6.0", "imageID": "registry.example.com/virt-launcher@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "containerID": "containerd://" + uid + uid, "started": true},
			},
		},
	}
}

func podList(n int) []byte {
	items := make([]any, n)
	for i := range items {
		items[i] = launcherPod(i)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"123456"},"items":`)
	b, _ := json.Marshal(items)
	buf.Write(b)
	buf.WriteString("}")
	return buf.Bytes()
}

// benchPodList runs restore over a list of 1000 pods, once an iteration.
func benchPodList(b *testing.B, restore func(rw *Rewriter, body []byte) error) {
	rw := New(rules.Default())
	body := podList(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := restore(rw, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRestorePodList1000(b *testing.B) {
	benchPodList(b, func(rw *Rewriter, body []byte) error {
		_, err := rw.Object(Restore, body, Target{})
		return err
	})
}

func BenchmarkRestorePodList1000Stream(b *testing.B) {
	benchPodList(b, func(rw *Rewriter, body []byte) error {
		return rw.ObjectStream(Restore, io.Discard, bytes.NewReader(body), Target{})
	})
}

// podEvents are n watch events about virt-launcher pods.
func podEvents(n int) (events [][]byte, total int) {
	events = make([][]byte, n)
	for i := range events {
		p := launcherPod(i % 50)
		p["kind"], p["apiVersion"] = "Pod", "v1"
		ev, _ := json.Marshal(map[string]any{"type": "MODIFIED", "object": p})
		events[i] = ev
		total += len(ev)
	}
	return events, total
}

func BenchmarkWatchEvents10000(b *testing.B) {
	rw := New(rules.Default())
	events, total := podEvents(10000)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	b.ResetTimer()
	var dst []byte
	for b.Loop() {
		for _, ev := range events {
			var err error
			dst, _, err = rw.WatchEvent(Restore, dst[:0], ev, Target{})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkBaselineJSONValid is a yardstick on the same machine: validating
// the same list with encoding/json (no rewriting, no output).
func BenchmarkBaselineJSONValid(b *testing.B) {
	body := podList(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkTargets measures what the performance targets name for the rewriting alone and prints
// it next to them (lines starting with TARGET): the restore of a 1000-pod list, in memory and
// streamed, its allocations against the size of the body, and the restore of one watch event.
// Each iteration runs every measurement once, together with json.Valid over the same list (a
// yardstick that only validates: no output) and the same restore written with gjson+sjson and
// with encoding/json (BASELINE, baseline_test.go), so that on a machine shared with other jobs
// the load falls on all alike; the medians are printed.
func BenchmarkTargets(b *testing.B) {
	rw := New(rules.Default())
	body := podList(1000)
	events, evBytes := podEvents(1000)
	const (
		mem = iota
		stream
		valid
		event
		gjsonBase
		encJSONBase
		nMeasures
	)
	var d [nMeasures][]time.Duration
	b.Run("turns", func(b *testing.B) {
		d = [nMeasures][]time.Duration{}
		var dst []byte
		out := make([]byte, 0, 2*len(body))
		for b.Loop() {
			t0 := time.Now()
			// into a buffer of its own, as the transport restores answers up to 1 MiB
			if _, err := rw.AppendObject(Restore, out, body, Target{}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := rw.ObjectStream(Restore, io.Discard, bytes.NewReader(body), Target{}); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
			t3 := time.Now()
			for _, ev := range events {
				var err error
				if dst, _, err = rw.WatchEvent(Restore, dst[:0], ev, Target{}); err != nil {
					b.Fatal(err)
				}
			}
			t4 := time.Now()
			if _, err := restoreGJSON(rw, body); err != nil {
				b.Fatal(err)
			}
			t5 := time.Now()
			if _, err := restoreEncodingJSON(rw, body); err != nil {
				b.Fatal(err)
			}
			t6 := time.Now()
			d[gjsonBase] = append(d[gjsonBase], t5.Sub(t4))
			d[encJSONBase] = append(d[encJSONBase], t6.Sub(t5))
			d[mem] = append(d[mem], t1.Sub(t0))
			d[stream] = append(d[stream], t2.Sub(t1))
			d[valid] = append(d[valid], t3.Sub(t2))
			d[event] = append(d[event], t4.Sub(t3)/time.Duration(len(events)))
		}
	})
	if len(d[mem]) == 0 {
		return
	}
	var med [nMeasures]time.Duration
	for i := range med {
		s := slices.Clone(d[i])
		slices.Sort(s)
		med[i] = s[len(s)/2]
	}
	allocated := func(f func()) float64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc - m0.TotalAlloc)
	}
	memAlloc := allocated(func() { _, _ = rw.Object(Restore, body, Target{}) })
	streamAlloc := allocated(func() { _ = rw.ObjectStream(Restore, io.Discard, bytes.NewReader(body), Target{}) })
	mb := float64(len(body)) / 1e6
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	gjsonAlloc := allocated(func() { _, _ = restoreGJSON(rw, body) })
	encAlloc := allocated(func() { _, _ = restoreEncodingJSON(rw, body) })
	fmt.Printf("TARGET restore 1000 pods (%.1f MB) in memory: %.1f ms, %.2f GB/s (target <= 6 ms: %s); streamed, as the transport restores answers over 1 MiB: %.1f ms (%s); json.Valid over the same body: %.1f ms (restore/json.Valid %.2fx); %d turns\n",
		mb, ms(med[mem]), mb/1e3/med[mem].Seconds(), verdict(med[mem] <= 6*time.Millisecond), ms(med[stream]), verdict(med[stream] <= 6*time.Millisecond),
		ms(med[valid]), float64(med[mem])/float64(med[valid]), len(d[mem]))
	fmt.Printf("TARGET allocated by that restore: Object (a new output) %.1f MB, %.2fx the body (target <= 1.2x: %s); streamed %.2f MB, %.3fx the body (flat: %s)\n",
		memAlloc/1e6, memAlloc/float64(len(body)), verdict(memAlloc <= 1.2*float64(len(body))),
		streamAlloc/1e6, streamAlloc/float64(len(body)), verdict(streamAlloc <= 0.01*float64(len(body))))
	fmt.Printf("TARGET restore of one watch event (virt-launcher pod, %d KB): %.1f µs (target <= 3 µs added per event: %s; through the proxy: see test/bench)\n",
		evBytes/len(events)>>10, float64(med[event])/1e3, verdict(med[event] <= 3*time.Microsecond))
	fmt.Printf("BASELINE the same restore with gjson+sjson (the reference rewriter's approach): %.1f ms, %.1f MB allocated (%.1fx the engine's time); with encoding/json: %.1f ms, %.1f MB allocated (%.1fx)\n",
		ms(med[gjsonBase]), gjsonAlloc/1e6, float64(med[gjsonBase])/float64(med[mem]),
		ms(med[encJSONBase]), encAlloc/1e6, float64(med[encJSONBase])/float64(med[mem]))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
