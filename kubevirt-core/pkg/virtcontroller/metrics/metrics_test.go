package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func vmi(name string, phase kubevirtv1.VirtualMachineInstancePhase, node string, ann map[string]string) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann},
		Status:     kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: node},
	}
}

func TestPhaseCount(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		vmi("a", kubevirtv1.Running, "node1", map[string]string{"vm.kubevirt.io/os": "debian"}),
		vmi("b", kubevirtv1.Running, "node1", map[string]string{"vm.kubevirt.io/os": "debian"}),
		vmi("c", kubevirtv1.Scheduling, "", nil),
		vmi("d", "", "", nil),
	).Build()
	want := `
# HELP kubevirt_vmi_phase_count Sum of VMIs per phase and node.
# TYPE kubevirt_vmi_phase_count gauge
kubevirt_vmi_phase_count{flavor="<none>",instance_type="<none>",node="<none>",os="<none>",phase="pending",preference="<none>",workload="<none>"} 1
kubevirt_vmi_phase_count{flavor="<none>",instance_type="<none>",node="<none>",os="<none>",phase="scheduling",preference="<none>",workload="<none>"} 1
kubevirt_vmi_phase_count{flavor="<none>",instance_type="<none>",node="node1",os="debian",phase="running",preference="<none>",workload="<none>"} 2
`
	if err := testutil.CollectAndCompare(&VMICollector{Reader: c}, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
