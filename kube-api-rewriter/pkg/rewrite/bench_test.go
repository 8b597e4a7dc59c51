package rewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

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

func BenchmarkRestorePodList1000(b *testing.B) {
	rw := New(rules.Default())
	body := podList(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := rw.Object(Restore, body, Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRestorePodList1000Stream(b *testing.B) {
	rw := New(rules.Default())
	body := podList(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := rw.ObjectStream(Restore, io.Discard, bytes.NewReader(body), Target{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWatchEvents10000(b *testing.B) {
	rw := New(rules.Default())
	events := make([][]byte, 10000)
	total := 0
	for i := range events {
		p := launcherPod(i % 50)
		p["kind"], p["apiVersion"] = "Pod", "v1"
		ev, _ := json.Marshal(map[string]any{"type": "MODIFIED", "object": p})
		events[i] = ev
		total += len(ev)
	}
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
