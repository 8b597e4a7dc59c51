package replicaset

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newRS(mut ...func(*kubevirtv1.VirtualMachineInstanceReplicaSet)) *kubevirtv1.VirtualMachineInstanceReplicaSet {
	rs := &kubevirtv1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid"},
		Spec: kubevirtv1.VirtualMachineInstanceReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"a": "b"}},
			},
		},
	}
	for _, m := range mut {
		m(rs)
	}
	return rs
}

func replicas(n int32) func(*kubevirtv1.VirtualMachineInstanceReplicaSet) {
	return func(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = &n }
}

func paused(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Paused = true }

// vmi builds a replica: its name says its age (a0 oldest), its phase and readiness its state.
func vmi(name string, age int, phase kubevirtv1.VirtualMachineInstancePhase, mut ...func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-time.Duration(age) * time.Minute)),
	}}
	v.Status.Phase = phase
	for _, m := range mut {
		m(v)
	}
	return v
}

func ready(v *kubevirtv1.VirtualMachineInstance) {
	v.Status.Conditions = append(v.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue})
}

func terminatingPod(v *kubevirtv1.VirtualMachineInstance) {
	v.Status.Conditions = append(v.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: kubevirtv1.PodTerminatingReason,
	})
}

func deleting(v *kubevirtv1.VirtualMachineInstance) {
	t := metav1.NewTime(now)
	v.DeletionTimestamp = &t
}

func names(vmis []*kubevirtv1.VirtualMachineInstance) []string {
	var out []string
	for _, v := range vmis {
		out = append(out, v.Name)
	}
	return out
}

func TestDecide(t *testing.T) {
	running := func(n string, age int) *kubevirtv1.VirtualMachineInstance {
		return vmi(n, age, kubevirtv1.Running, ready)
	}
	tests := []struct {
		name    string
		rs      *kubevirtv1.VirtualMachineInstanceReplicaSet
		vmis    []*kubevirtv1.VirtualMachineInstance
		burst   int
		create  int
		deleted []string
	}{
		{name: "replicas default to one", rs: newRS(), create: 1},
		{name: "scale up", rs: newRS(replicas(3)), vmis: []*kubevirtv1.VirtualMachineInstance{running("a", 1)}, create: 2},
		{name: "steady", rs: newRS(replicas(1)), vmis: []*kubevirtv1.VirtualMachineInstance{running("a", 1)}},
		{name: "burst caps creation", rs: newRS(replicas(10)), burst: 3, create: 3},
		{name: "scale to zero", rs: newRS(replicas(0)), vmis: []*kubevirtv1.VirtualMachineInstance{running("a", 1), running("b", 2)}, deleted: []string{"a", "b"}},
		{
			name: "scale down prefers not running, then not ready, then youngest",
			rs:   newRS(replicas(2)),
			vmis: []*kubevirtv1.VirtualMachineInstance{
				running("old", 9), running("young", 1), vmi("unready", 5, kubevirtv1.Running), vmi("pending", 8, kubevirtv1.Scheduling),
			},
			deleted: []string{"pending", "unready"},
		},
		{name: "scale down picks the youngest ready one", rs: newRS(replicas(2)), vmis: []*kubevirtv1.VirtualMachineInstance{running("old", 9), running("young", 1), running("mid", 5)}, deleted: []string{"young"}},
		{
			name:   "finished VMIs are replaced and cleaned",
			rs:     newRS(replicas(2)),
			vmis:   []*kubevirtv1.VirtualMachineInstance{running("a", 3), vmi("f", 2, kubevirtv1.Failed), vmi("s", 2, kubevirtv1.Succeeded)},
			create: 1, deleted: []string{"f", "s"},
		},
		{name: "losing its pod is not a replica", rs: newRS(replicas(1)), vmis: []*kubevirtv1.VirtualMachineInstance{vmi("t", 1, kubevirtv1.Running, terminatingPod)}, create: 1, deleted: []string{"t"}},
		{name: "deleting VMIs are neither counted nor deleted again", rs: newRS(replicas(1)), vmis: []*kubevirtv1.VirtualMachineInstance{vmi("d", 1, kubevirtv1.Running, deleting)}, create: 1},
		{name: "paused does nothing", rs: newRS(replicas(3), paused), vmis: []*kubevirtv1.VirtualMachineInstance{vmi("f", 2, kubevirtv1.Failed)}},
		{name: "deleted replica set does nothing", rs: newRS(replicas(3), func(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) {
			t := metav1.NewTime(now)
			rs.DeletionTimestamp = &t
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.rs, tt.vmis, tt.burst)
			if p.Create != tt.create || !slices.Equal(names(p.Delete), tt.deleted) {
				t.Errorf("create %d delete %v, want %d %v", p.Create, names(p.Delete), tt.create, tt.deleted)
			}
		})
	}
}

func TestSelector(t *testing.T) {
	if s, err := Selector(newRS()); err != nil || s.String() != "app=web" {
		t.Errorf("selector %v, %v", s, err)
	}
	mismatch := newRS(func(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) {
		rs.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "db"}
	})
	noTemplate := newRS(func(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Template = nil })
	bad := newRS(func(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) {
		rs.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}
	})
	for name, rs := range map[string]*kubevirtv1.VirtualMachineInstanceReplicaSet{"mismatch": mismatch, "no template": noTemplate, "bad operator": bad} {
		if _, err := Selector(rs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNewVMI(t *testing.T) {
	rs := newRS()
	v := NewVMI(rs)
	if v.GenerateName != "web" || v.Name != "" || v.Namespace != "ns" || v.Labels["tier"] != "front" || v.Annotations["a"] != "b" {
		t.Errorf("meta %+v", v.ObjectMeta)
	}
	if !metav1.IsControlledBy(v, rs) || v.OwnerReferences[0].Kind != "VirtualMachineInstanceReplicaSet" || !*v.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("owners %+v", v.OwnerReferences)
	}
	v.Labels["tier"] = "changed"
	if rs.Spec.Template.ObjectMeta.Labels["tier"] != "front" {
		t.Error("VMI shares its labels with the template")
	}
	rs.Spec.Template.ObjectMeta.GenerateName = "custom-"
	if got := NewVMI(rs).GenerateName; got != "custom-" {
		t.Errorf("generateName %q", got)
	}
}

func TestStatus(t *testing.T) {
	rs := newRS(replicas(3))
	sel, _ := Selector(rs)
	vmis := []*kubevirtv1.VirtualMachineInstance{
		vmi("a", 1, kubevirtv1.Running, ready), vmi("b", 1, kubevirtv1.Scheduling), vmi("f", 1, kubevirtv1.Failed), vmi("d", 1, kubevirtv1.Running, ready, deleting),
	}
	st := Status(rs, vmis, sel, Plan{Create: 1}, nil, now)
	if st.Replicas != 2 || st.ReadyReplicas != 1 || st.LabelSelector != "app=web" || len(st.Conditions) != 0 {
		t.Errorf("status %+v", st)
	}

	rs.Status = Status(rs, vmis, sel, Plan{Create: 1}, errors.New("quota exceeded"), now)
	c := rs.Status.Conditions
	if len(c) != 1 || c[0].Type != kubevirtv1.VirtualMachineInstanceReplicaSetReplicaFailure || c[0].Reason != ReasonFailedCreate ||
		c[0].Message != "quota exceeded" || !c[0].LastTransitionTime.Equal(&metav1.Time{Time: now}) {
		t.Errorf("failure conditions %+v", c)
	}
	// The failure persists: its transition time stays.
	later := Status(rs, vmis, sel, Plan{Delete: vmis[:1]}, errors.New("forbidden"), now.Add(time.Minute))
	if c := later.Conditions; len(c) != 1 || c[0].Reason != ReasonFailedDelete || !c[0].LastTransitionTime.Equal(&metav1.Time{Time: now}) {
		t.Errorf("persisting failure %+v", c)
	}
	if st := Status(rs, vmis, sel, Plan{}, nil, now); len(st.Conditions) != 0 {
		t.Errorf("failure not cleared: %+v", st.Conditions)
	}

	p := newRS(paused)
	if st := Status(p, nil, sel, Plan{}, nil, now); len(st.Conditions) != 1 || st.Conditions[0].Type != kubevirtv1.VirtualMachineInstanceReplicaSetReplicaPaused ||
		st.Conditions[0].Reason != ReasonPaused || st.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("paused conditions %+v", st.Conditions)
	}
}
