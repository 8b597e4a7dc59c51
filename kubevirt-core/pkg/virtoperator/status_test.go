package virtoperator

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var now = time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)

func cond(s kubevirtv1.KubeVirtStatus, t kubevirtv1.KubeVirtConditionType) *kubevirtv1.KubeVirtCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// want is a condition's status and reason; a nil want means the condition must be absent.
type want struct {
	status corev1.ConditionStatus
	reason string
}

func checkConditions(t *testing.T, s kubevirtv1.KubeVirtStatus, wants map[kubevirtv1.KubeVirtConditionType]*want) {
	t.Helper()
	for typ, w := range wants {
		c := cond(s, typ)
		switch {
		case w == nil && c != nil:
			t.Errorf("%s present: %+v", typ, c)
		case w != nil && c == nil:
			t.Errorf("%s missing", typ)
		case w != nil && (c.Status != w.status || c.Reason != w.reason):
			t.Errorf("%s = %s/%s, want %s/%s (%s)", typ, c.Status, c.Reason, w.status, w.reason, c.Message)
		}
	}
}

var (
	avail  = kubevirtv1.KubeVirtConditionAvailable
	prog   = kubevirtv1.KubeVirtConditionProgressing
	degr   = kubevirtv1.KubeVirtConditionDegraded
	synced = kubevirtv1.KubeVirtConditionSynchronized
	made   = kubevirtv1.KubeVirtConditionCreated
	yes    = corev1.ConditionTrue
	no     = corev1.ConditionFalse
)

func TestInstalled(t *testing.T) {
	target := Target{Registry: "d8v.local", Version: "dev", DeploymentID: "id2", DeploymentConfig: "{}", OperatorVersion: "op1"}
	deployed := func() *kubevirtv1.KubeVirt {
		kv := testKV()
		kv.Status = Installed(kv, Target{Registry: "d8v.local", Version: "old", DeploymentID: "id1", OperatorVersion: "op1"}, nil, now.Add(-time.Hour))
		return kv
	}
	tests := []struct {
		name     string
		kv       *kubevirtv1.KubeVirt
		notReady []string
		phase    kubevirtv1.KubeVirtPhase
		conds    map[kubevirtv1.KubeVirtConditionType]*want
		observed string
	}{
		{name: "first install waits", kv: testKV(), notReady: []string{"Deployment virt-api"}, phase: kubevirtv1.KubeVirtPhaseDeploying,
			conds: map[kubevirtv1.KubeVirtConditionType]*want{
				avail: {no, ReasonDeploying}, prog: {yes, ReasonDeploying}, degr: {no, ReasonDeploying}, made: {yes, ReasonCreated}, synced: nil,
			}},
		{name: "all ready", kv: testKV(), phase: kubevirtv1.KubeVirtPhaseDeployed, observed: "id2",
			conds: map[kubevirtv1.KubeVirtConditionType]*want{avail: {yes, ReasonReady}, prog: {no, ReasonReady}, degr: {no, ReasonReady}}},
		{name: "a new version rolls out", kv: deployed(), notReady: []string{"DaemonSet virt-handler"}, phase: kubevirtv1.KubeVirtPhaseDeployed, observed: "id1",
			conds: map[kubevirtv1.KubeVirtConditionType]*want{avail: {yes, ReasonUpdating}, prog: {yes, ReasonUpdating}, degr: {yes, ReasonUpdating}}},
		{name: "deployed, then a component fails", kv: func() *kubevirtv1.KubeVirt {
			kv := testKV()
			kv.Status = Installed(kv, target, nil, now.Add(-time.Hour))
			return kv
		}(), notReady: []string{"Deployment virt-controller"}, phase: kubevirtv1.KubeVirtPhaseDeployed, observed: "id2",
			conds: map[kubevirtv1.KubeVirtConditionType]*want{avail: {no, ReasonNotReady}, prog: {yes, ReasonNotReady}, degr: {yes, ReasonNotReady}}},
		{name: "a failure heals", kv: func() *kubevirtv1.KubeVirt {
			kv := testKV()
			kv.Status = Failed(kv, target, errors.New("boom"), now.Add(-time.Hour))
			return kv
		}(), phase: kubevirtv1.KubeVirtPhaseDeployed, observed: "id2",
			conds: map[kubevirtv1.KubeVirtConditionType]*want{synced: nil, avail: {yes, ReasonReady}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Installed(tt.kv, target, tt.notReady, now)
			if s.Phase != tt.phase {
				t.Errorf("phase %s, want %s", s.Phase, tt.phase)
			}
			checkConditions(t, s, tt.conds)
			if s.ObservedDeploymentID != tt.observed {
				t.Errorf("observed deployment %q, want %q", s.ObservedDeploymentID, tt.observed)
			}
			if s.TargetKubeVirtVersion != "dev" || s.TargetKubeVirtRegistry != "d8v.local" || s.OperatorVersion != "op1" || s.TargetDeploymentID != "id2" {
				t.Errorf("targets %+v", s)
			}
			// The generation is observed once it is fully deployed, and stays until the next one is.
			if len(tt.notReady) == 0 && (s.ObservedGeneration == nil || *s.ObservedGeneration != 3) {
				t.Errorf("observed generation %v after deploying generation 3", s.ObservedGeneration)
			}
			if tt.kv.Status.ObservedGeneration == nil && len(tt.notReady) > 0 && s.ObservedGeneration != nil {
				t.Errorf("observed generation %d before anything was deployed", *s.ObservedGeneration)
			}
		})
	}
}

func TestConditionTimes(t *testing.T) {
	kv := testKV()
	kv.Status = Installed(kv, Target{Version: "dev"}, []string{"Deployment virt-api"}, now)
	same := Installed(kv, Target{Version: "dev"}, []string{"Deployment virt-api"}, now.Add(time.Minute))
	if c := cond(same, avail); !c.LastTransitionTime.Time.Equal(now) || !c.LastProbeTime.Time.Equal(now) {
		t.Errorf("an unchanged condition moved its times: %+v", c)
	}
	kv.Status = same
	changed := Installed(kv, Target{Version: "dev"}, nil, now.Add(2*time.Minute))
	if c := cond(changed, avail); !c.LastTransitionTime.Time.Equal(now.Add(2 * time.Minute)) {
		t.Errorf("a changed condition kept its time: %+v", c)
	}
}

func TestOtherStatuses(t *testing.T) {
	tests := []struct {
		name  string
		got   kubevirtv1.KubeVirtStatus
		phase kubevirtv1.KubeVirtPhase
		conds map[kubevirtv1.KubeVirtConditionType]*want
	}{
		{name: "failed", got: Failed(testKV(), Target{}, errors.New("boom"), now), phase: kubevirtv1.KubeVirtPhaseDeploying,
			conds: map[kubevirtv1.KubeVirtConditionType]*want{synced: {no, ReasonFailed}, avail: {no, ReasonFailed}, degr: {yes, ReasonFailed}}},
		{name: "deleting", got: Deleting(testKV(), nil, false, now), phase: kubevirtv1.KubeVirtPhaseDeleting,
			conds: map[kubevirtv1.KubeVirtConditionType]*want{avail: {no, ReasonDeleting}, degr: {yes, ReasonDeleting}, made: nil, synced: nil}},
		{name: "deletion failed", got: Deleting(testKV(), errors.New("forbidden"), false, now), phase: kubevirtv1.KubeVirtPhaseDeleting,
			conds: map[kubevirtv1.KubeVirtConditionType]*want{synced: {no, ReasonDeletionFailed}}},
		{name: "deleted", got: Deleting(testKV(), nil, true, now), phase: kubevirtv1.KubeVirtPhaseDeleted,
			conds: map[kubevirtv1.KubeVirtConditionType]*want{avail: {no, ReasonDeleting}}},
		{name: "another one is honoured", got: Conflicting(testKV(), "kubevirt/kubevirt", now), phase: "",
			conds: map[kubevirtv1.KubeVirtConditionType]*want{synced: {no, ReasonExisting}, avail: nil, prog: nil, degr: nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.Phase != tt.phase {
				t.Errorf("phase %q, want %q", tt.got.Phase, tt.phase)
			}
			checkConditions(t, tt.got, tt.conds)
		})
	}
}

func kvAt(ns, name string, age time.Duration, finalizer, deleting bool) kubevirtv1.KubeVirt {
	kv := kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
		CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	if finalizer {
		kv.Finalizers = []string{Finalizer}
	}
	if deleting {
		kv.DeletionTimestamp = &metav1.Time{Time: now}
	}
	return kv
}

func TestActive(t *testing.T) {
	tests := []struct {
		name string
		kvs  []kubevirtv1.KubeVirt
		want string
	}{
		{name: "none", want: ""},
		{name: "the oldest", kvs: []kubevirtv1.KubeVirt{kvAt("b", "kv", time.Minute, false, false), kvAt("a", "kv", time.Hour, false, false)}, want: "a/kv"},
		{name: "the one installed beats an older one", kvs: []kubevirtv1.KubeVirt{kvAt("a", "kv", time.Hour, false, false), kvAt("b", "kv", time.Minute, true, false)}, want: "b/kv"},
		{name: "same age goes by name", kvs: []kubevirtv1.KubeVirt{kvAt("b", "kv", time.Hour, false, false), kvAt("a", "kv", time.Hour, false, false)}, want: "a/kv"},
		{name: "one being deleted stays active while it uninstalls", kvs: []kubevirtv1.KubeVirt{kvAt("a", "kv", time.Hour, true, true), kvAt("b", "kv", time.Minute, false, false)}, want: "a/kv"},
		{name: "one going without the finalizer never is", kvs: []kubevirtv1.KubeVirt{kvAt("a", "kv", time.Hour, false, true), kvAt("b", "kv", time.Minute, false, false)}, want: "b/kv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if a := Active(tt.kvs); a != nil {
				got = a.Namespace + "/" + a.Name
			}
			if got != tt.want {
				t.Errorf("active %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWorkloadReadiness(t *testing.T) {
	two := int32(2)
	dep := func(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}}
	}
	ds := func(gen, observed int64, desired, updated, available int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberAvailable: available}}
	}
	tests := []struct {
		name  string
		ready func() (bool, string)
		want  bool
	}{
		{"deployment available", func() (bool, string) { return DeploymentReady(dep(2, 2, 2, 2, 2)) }, true},
		{"deployment not observed", func() (bool, string) { return DeploymentReady(dep(3, 2, 2, 2, 2)) }, false},
		{"deployment rolling", func() (bool, string) { return DeploymentReady(dep(2, 2, 3, 1, 2)) }, false},
		{"deployment old replica left", func() (bool, string) { return DeploymentReady(dep(2, 2, 3, 2, 2)) }, false},
		{"deployment unavailable", func() (bool, string) { return DeploymentReady(dep(2, 2, 2, 2, 1)) }, false},
		{"daemonset available", func() (bool, string) { return DaemonSetReady(ds(1, 1, 3, 3, 3)) }, true},
		{"daemonset on no node", func() (bool, string) { return DaemonSetReady(ds(1, 1, 0, 0, 0)) }, false},
		{"daemonset rolling", func() (bool, string) { return DaemonSetReady(ds(1, 1, 3, 2, 3)) }, false},
		{"daemonset unavailable", func() (bool, string) { return DaemonSetReady(ds(1, 1, 3, 3, 2)) }, false},
		{"daemonset not observed", func() (bool, string) { return DaemonSetReady(ds(2, 1, 3, 3, 3)) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := tt.ready()
			if got != tt.want || (got == (why != "")) {
				t.Errorf("ready %v (%q), want %v", got, why, tt.want)
			}
		})
	}
}
