package vmclass

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestAvailableNodes(t *testing.T) {
	nodes := []corev1.Node{
		node("a", map[string]string{"virt": "yes"}),
		node("b", map[string]string{"virt": "yes", "gpu": "1"}),
		node("c", map[string]string{"virt": "yes"}, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}),
		node("d", map[string]string{"virt": "yes"}, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}),
		node("e", nil),
	}
	cases := []struct {
		name string
		spec v1alpha3.VirtualMachineClassSpec
		want []string
	}{
		{"every untainted node", v1alpha3.VirtualMachineClassSpec{}, []string{"a", "b", "d", "e"}},
		{"labels", v1alpha3.VirtualMachineClassSpec{NodeSelector: v1alpha2.NodeSelector{MatchLabels: map[string]string{"virt": "yes"}}}, []string{"a", "b", "d"}},
		{"expressions", v1alpha3.VirtualMachineClassSpec{NodeSelector: v1alpha2.NodeSelector{
			MatchLabels:      map[string]string{"virt": "yes"},
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist}},
		}}, []string{"a", "d"}},
		{"tolerations", v1alpha3.VirtualMachineClassSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}, []string{"a", "b", "c", "d", "e"}},
	}
	for _, tc := range cases {
		got, err := AvailableNodes(&v1alpha3.VirtualMachineClass{Spec: tc.spec}, nodes)
		if err != nil || !slices.Equal(Names(got), tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	bad := v1alpha3.VirtualMachineClassSpec{NodeSelector: v1alpha2.NodeSelector{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: "Near"}}}}
	if _, err := AvailableNodes(&v1alpha3.VirtualMachineClass{Spec: bad}, nodes); err == nil {
		t.Error("a bad operator accepted")
	}
}

func TestStatus(t *testing.T) {
	now := metav1.Now()
	vms := []v1alpha2.VirtualMachine{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "x"}, Spec: v1alpha2.VirtualMachineSpec{VirtualMachineClassName: "c"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "y"}, Spec: v1alpha2.VirtualMachineSpec{VirtualMachineClassName: "other"}},
	}
	users := Users("c", vms)
	if !slices.Equal(users, []string{"n/x"}) {
		t.Fatalf("users %v", users)
	}
	deleting := &v1alpha3.VirtualMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", DeletionTimestamp: &now}}
	cases := []struct {
		name  string
		class *v1alpha3.VirtualMachineClass
		nodes []string
		users []string
		phase v1alpha2.VirtualMachineClassPhase
		inUse metav1.ConditionStatus
	}{
		{"ready", &v1alpha3.VirtualMachineClass{}, []string{"a"}, nil, v1alpha2.ClassPhaseReady, metav1.ConditionFalse},
		{"no node", &v1alpha3.VirtualMachineClass{}, nil, users, v1alpha2.ClassPhasePending, metav1.ConditionTrue},
		{"deleted while in use", deleting, []string{"a"}, users, v1alpha2.ClassPhaseTerminating, metav1.ConditionTrue},
	}
	for _, tc := range cases {
		st := Status(tc.class, tc.nodes, "", Discovery{}, tc.users, now)
		if st.Phase != tc.phase || st.Conditions[0].Type != "InUse" || st.Conditions[0].Status != tc.inUse {
			t.Errorf("%s: phase %s conditions %+v", tc.name, st.Phase, st.Conditions)
		}
	}
}
