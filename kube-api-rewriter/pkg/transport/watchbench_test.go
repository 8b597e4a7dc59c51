package transport

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
)

// vmEvent is a MODIFIED event of an internal VirtualMachine in the cluster view, about 1.5 KB,
// as the apiserver writes it (one line each).
func vmEvent(i int) string {
	return c(fmt.Sprintf(`{"type":"MODIFIED","object":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine",`+
		`"metadata":{"name":"vm-%[1]d","namespace":"default","uid":"3b0b1c2d-0000-4000-8000-%012[1]d","resourceVersion":"%[2]d","generation":2,`+
		`"creationTimestamp":"2025-01-01T00:00:00Z","labels":{"IK/vm":"vm-%[1]d","app":"demo","vm.IK/name":"vm-%[1]d"},`+
		`"annotations":{"IK/latest-observed-api-version":"v1","IK/storage-observed-api-version":"v1"},"finalizers":["IK/virtualMachineControllerFinalize"],`+
		`"ownerReferences":[{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","name":"vm-%[1]d","uid":"6f1c8a3e-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}]},`+
		`"spec":{"runStrategy":"Always","template":{"metadata":{"labels":{"IK/vm":"vm-%[1]d","vm.IK/name":"vm-%[1]d"}},"spec":{"domain":{"cpu":{"cores":2,"sockets":1,"model":"host-model"},`+
		`"memory":{"guest":"2Gi"},"devices":{"disks":[{"name":"root","disk":{"bus":"virtio"}}],"interfaces":[{"name":"default","masquerade":{}}]},"features":{"acpi":{},"smm":{"enabled":true}},`+
		`"firmware":{"bootloader":{"efi":{"secureBoot":false}}}},"networks":[{"name":"default","pod":{}}],"volumes":[{"name":"root","persistentVolumeClaim":{"claimName":"vm-%[1]d-root"}}],`+
		`"nodeSelector":{"IK/schedulable":"true","cpu-model.node.virtualization.deckhouse.io/Haswell":"true"}}}},`+
		`"status":{"created":true,"ready":true,"printableStatus":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2025-01-01T00:00:10Z"}]}}}`+"\n", i, 1000+i))
}

// BenchmarkWatchBody restores a stream of 1000 VM events as the api listener reads it: the
// upstream body hands out 4 KB reads (net/http's read buffer), so that most reads end inside an
// event, and the client reads 32 KB at a time (httputil.ReverseProxy's buffer). It reports the
// time and the allocations per event.
func BenchmarkWatchBody(b *testing.B) {
	const n = 1000
	var stream bytes.Buffer
	for i := range n {
		stream.WriteString(vmEvent(i))
	}
	rt, _ := newEngine(http.DefaultTransport)
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(stream.Len()))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for b.Loop() {
		body := rt.restoreWatch(&pieces{b: stream.Bytes(), sizes: []int{4 << 10}}, rewriteTarget(), "virtualmachines.kubevirt.io")
		for {
			_, err := body.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	runtime.ReadMemStats(&m1)
	events := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/events, "allocs/event")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/events, "B/event")
}
