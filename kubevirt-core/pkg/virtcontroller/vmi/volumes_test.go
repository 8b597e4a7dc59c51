package vmi

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

func withClaims(names ...string) func(*kubevirtv1.VirtualMachineInstance) {
	return func(vmi *kubevirtv1.VirtualMachineInstance) {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, kubevirtv1.Volume{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
			ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "disk"}}})
		for _, n := range names {
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, kubevirtv1.Volume{Name: "vol-" + n, VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: n}}}})
		}
	}
}

func claim(name string, mut ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	for _, m := range mut {
		m(pvc)
	}
	return pvc
}

func boundWith(capacity string) func(*corev1.PersistentVolumeClaim) {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
}

func TestVolumeStatus(t *testing.T) {
	fsMode, blockMode := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	info := func(name, capacity string, mode *corev1.PersistentVolumeMode) *kubevirtv1.PersistentVolumeClaimInfo {
		i := &kubevirtv1.PersistentVolumeClaimInfo{
			ClaimName: name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: mode,
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		}
		if capacity != "" {
			i.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		return i
	}
	tests := []struct {
		name   string
		vmi    *kubevirtv1.VirtualMachineInstance
		prev   []kubevirtv1.VolumeStatus
		claims []*corev1.PersistentVolumeClaim
		want   []kubevirtv1.VolumeStatus
	}{
		{name: "no claims", vmi: newVMI(withClaims())},
		{name: "bound claim, volume mode defaulting to filesystem", vmi: newVMI(withClaims("a")),
			claims: []*corev1.PersistentVolumeClaim{claim("a", boundWith("2Gi"))},
			want:   []kubevirtv1.VolumeStatus{{Name: "vol-a", PersistentVolumeClaimInfo: info("a", "2Gi", &fsMode)}}},
		{name: "unbound claim has no capacity yet", vmi: newVMI(withClaims("a")),
			claims: []*corev1.PersistentVolumeClaim{claim("a", func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeMode = &blockMode })},
			want:   []kubevirtv1.VolumeStatus{{Name: "vol-a", PersistentVolumeClaimInfo: info("a", "", &blockMode)}}},
		{name: "missing claim left out", vmi: newVMI(withClaims("a", "b")),
			claims: []*corev1.PersistentVolumeClaim{claim("b", boundWith("1Gi"))},
			want:   []kubevirtv1.VolumeStatus{{Name: "vol-b", PersistentVolumeClaimInfo: info("b", "1Gi", &fsMode)}}},
		{name: "ephemeral volume's claim recorded like a claim volume's", vmi: newVMI(func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Volumes = []kubevirtv1.Volume{{Name: "eph", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "a"}}}}}
		}),
			claims: []*corev1.PersistentVolumeClaim{claim("a", boundWith("2Gi"))},
			want:   []kubevirtv1.VolumeStatus{{Name: "eph", PersistentVolumeClaimInfo: info("a", "2Gi", &fsMode)}}},
		{name: "other entries kept, existing entry updated in place", vmi: newVMI(withClaims("a")),
			prev:   []kubevirtv1.VolumeStatus{{Name: "root", Target: "vda"}, {Name: "vol-a", Target: "vdb", PersistentVolumeClaimInfo: info("a", "", &fsMode)}},
			claims: []*corev1.PersistentVolumeClaim{claim("a", boundWith("2Gi"))},
			want:   []kubevirtv1.VolumeStatus{{Name: "root", Target: "vda"}, {Name: "vol-a", Target: "vdb", PersistentVolumeClaimInfo: info("a", "2Gi", &fsMode)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := map[string]*corev1.PersistentVolumeClaim{}
			for _, c := range tt.claims {
				claims[c.Name] = c
			}
			prev := append([]kubevirtv1.VolumeStatus(nil), tt.prev...)
			got := VolumeStatus(tt.vmi, tt.prev, claims)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.prev, prev) {
				t.Error("the previous status was modified")
			}
			tt.vmi.Status.VolumeStatus = got
			if want := len(tt.claims) == len(ClaimNames(tt.vmi)); ClaimsRecorded(tt.vmi) != want {
				t.Errorf("ClaimsRecorded = %v, want %v", !want, want)
			}
		})
	}
}

// TestReconcileWaitsForClaims: no launcher Pod while a claim is missing, KubeVirt's condition
// meanwhile, and the Pod with the claim recorded once it exists.
func TestReconcileWaitsForClaims(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	vmi := newVMI(withClaims("data"))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(vmi).Build()
	r := NewReconciler(c, c, LauncherConfig{Image: "launcher"}, clocktesting.NewFakePassiveClock(now), &events.FakeRecorder{})
	ctx := context.Background()
	key := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	reconcile := func() (ctrl.Result, *kubevirtv1.VirtualMachineInstance, []corev1.Pod) {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		got := &kubevirtv1.VirtualMachineInstance{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(vmi.Namespace)); err != nil {
			t.Fatal(err)
		}
		return res, got, pods.Items
	}

	res, got, pods := reconcile()
	cond := vmicond.Get(got.Status.Conditions, kubevirtv1.VirtualMachineInstanceSynchronized)
	switch {
	case len(pods) != 0:
		t.Fatalf("launcher pod created without the claim")
	case res.RequeueAfter == 0:
		t.Error("no retry while waiting for the claim")
	case got.Status.Phase != kubevirtv1.Pending:
		t.Errorf("phase %s, want Pending", got.Status.Phase)
	case cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != ReasonPVCNotFound ||
		cond.Message != "PVC ns/data does not exist, waiting for it to appear":
		t.Errorf("Synchronized condition %+v", cond)
	}

	if err := c.Create(ctx, claim("data", boundWith("2Gi"))); err != nil {
		t.Fatal(err)
	}
	res, got, pods = reconcile()
	if len(pods) != 1 || res.RequeueAfter != 0 {
		t.Fatalf("%d launcher pods, result %+v; want one pod", len(pods), res)
	}
	if cond := vmicond.Get(got.Status.Conditions, kubevirtv1.VirtualMachineInstanceSynchronized); cond != nil {
		t.Errorf("Synchronized condition left: %+v", cond)
	}
	if len(got.Status.VolumeStatus) != 1 || got.Status.VolumeStatus[0].PersistentVolumeClaimInfo == nil ||
		got.Status.VolumeStatus[0].PersistentVolumeClaimInfo.Capacity.Storage().String() != "2Gi" {
		t.Errorf("volume status %+v, want the claim's", got.Status.VolumeStatus)
	}
}
