package vmclass

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmclasscondition"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// labelled is a node with the labeller's feature labels and further labels.
func labelled(name string, features string, more ...string) corev1.Node {
	l := map[string]string{}
	for _, f := range strings.Fields(features) {
		l[kubevirtv1.CPUFeatureLabel+f] = "true"
	}
	for i := 0; i+1 < len(more); i += 2 {
		l[more[i]] = more[i+1]
	}
	return node(name, l)
}

func TestNodeFeatures(t *testing.T) {
	n := labelled("a", "vmx sse4.2 avx", kubevirtv1.CPUFeatureLabel+"off", "false", kubevirtv1.CPUModelLabel+"Haswell", "true", "other/avx512f", "true")
	if got, want := NodeFeatures(&n), []string{"avx", "sse4.2", "vmx"}; !slices.Equal(got, want) {
		t.Errorf("NodeFeatures %v, want %v", got, want)
	}
}

func TestDiscover(t *testing.T) {
	nodes := []corev1.Node{
		labelled("a", "avx avx2 sse4.2 vmx", "rack", "1"),
		labelled("b", "avx sse4.2 vmx x2apic", "rack", "1"),
		labelled("c", "avx sse4.2", "rack", "2"),
	}
	rack := func(r string) *v1alpha2.CPUDiscovery {
		return &v1alpha2.CPUDiscovery{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"rack": r}}}
	}
	cases := []struct {
		name      string
		cpu       v1alpha2.CPU
		available []corev1.Node
		want      Discovery
	}{
		{"discovery on every available node", v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery}, nodes,
			Discovery{Features: v1alpha2.CPUFeatures{Enabled: []string{"avx", "sse4.2"}}, Nodes: []string{"a", "b", "c"}}},
		{"discovery on the selected nodes", v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery, Discovery: rack("1")}, nodes,
			Discovery{Features: v1alpha2.CPUFeatures{Enabled: []string{"avx", "sse4.2", "vmx"}}, Nodes: []string{"a", "b"}}},
		{"discovery selecting no node", v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery, Discovery: rack("9")}, nodes,
			Discovery{Features: v1alpha2.CPUFeatures{NotEnabledCommon: []string{"avx", "sse4.2"}}, Problem: "no available node of the class matches spec.cpu.discovery.nodeSelector"}},
		{"discovery on unlabelled nodes", v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery}, []corev1.Node{node("x", nil)},
			Discovery{Nodes: []string{"x"}, Problem: "the nodes x have no processor feature labels in common (the node labeller of virt-handler writes them)"}},
		{"discovery with no available node", v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery}, nil,
			Discovery{Problem: "no available node of the class matches spec.cpu.discovery.nodeSelector"}},
		{"features", v1alpha2.CPU{Type: v1alpha2.CPUTypeFeatures, Features: []string{"vmx", "avx"}}, nodes,
			Discovery{Features: v1alpha2.CPUFeatures{Enabled: []string{"avx", "vmx"}, NotEnabledCommon: []string{"sse4.2"}}}},
		{"model with features", v1alpha2.CPU{Type: v1alpha2.CPUTypeModel, Model: "Nehalem", Features: []string{"sse4.2"}}, nodes,
			Discovery{Features: v1alpha2.CPUFeatures{Enabled: []string{"sse4.2"}, NotEnabledCommon: []string{"avx"}}}},
		{"host", v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}, nodes, Discovery{}},
		{"host passthrough", v1alpha2.CPU{Type: v1alpha2.CPUTypeHostPassthrough}, nodes, Discovery{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Discover(&v1alpha3.VirtualMachineClass{Spec: v1alpha3.VirtualMachineClassSpec{CPU: tc.cpu}}, tc.available)
			if !slices.Equal(got.Features.Enabled, tc.want.Features.Enabled) || !slices.Equal(got.Features.NotEnabledCommon, tc.want.Features.NotEnabledCommon) ||
				!slices.Equal(got.Nodes, tc.want.Nodes) || got.Problem != tc.want.Problem {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	bad := v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery, Discovery: &v1alpha2.CPUDiscovery{NodeSelector: metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Near"}}}}}
	if got := Discover(&v1alpha3.VirtualMachineClass{Spec: v1alpha3.VirtualMachineClassSpec{CPU: bad}}, nodes); !strings.HasPrefix(got.Problem, "spec.cpu.discovery.nodeSelector: ") {
		t.Errorf("a bad selector: problem %q", got.Problem)
	}
}

// TestStatusOfADiscoveryClass: a Discovery class is Ready with Discovered True once it has its
// features, and Pending with Discovered False and the reason while it has none.
func TestStatusOfADiscoveryClass(t *testing.T) {
	now := metav1.Now()
	class := &v1alpha3.VirtualMachineClass{Spec: v1alpha3.VirtualMachineClassSpec{CPU: v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery}}}
	found := Discovery{Features: v1alpha2.CPUFeatures{Enabled: []string{"avx", "sse4.2"}}, Nodes: []string{"a", "b"}}
	st := Status(class, []string{"a", "b"}, "", found, nil, now)
	c := meta.FindStatusCondition(st.Conditions, string(vmclasscondition.TypeDiscovered))
	if st.Phase != v1alpha2.ClassPhaseReady || c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(vmclasscondition.ReasonDiscoverySucceeded) ||
		c.Message != "2 processor features common to the nodes a, b" || !slices.Equal(st.CPUFeatures.Enabled, found.Features.Enabled) {
		t.Errorf("discovered: phase %s features %+v condition %+v", st.Phase, st.CPUFeatures, c)
	}

	st = Status(class, []string{"a"}, "", Discovery{Problem: "no labels"}, nil, now)
	c = meta.FindStatusCondition(st.Conditions, string(vmclasscondition.TypeDiscovered))
	if st.Phase != v1alpha2.ClassPhasePending || c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(vmclasscondition.ReasonDiscoveryFailed) || c.Message != "no labels" {
		t.Errorf("not discovered: phase %s condition %+v", st.Phase, c)
	}

	other := &v1alpha3.VirtualMachineClass{Spec: v1alpha3.VirtualMachineClassSpec{CPU: v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}}}
	st = Status(other, []string{"a"}, "", Discovery{}, nil, now)
	c = meta.FindStatusCondition(st.Conditions, string(vmclasscondition.TypeDiscovered))
	if st.Phase != v1alpha2.ClassPhaseReady || c == nil || c.Reason != string(vmclasscondition.ReasonDiscoverySkip) {
		t.Errorf("a Host class: phase %s condition %+v", st.Phase, c)
	}
}
