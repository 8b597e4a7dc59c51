package provisioner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func TestVolumeSize(t *testing.T) {
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	for _, tt := range []struct {
		mode corev1.PersistentVolumeMode
		want int64
		size int64
	}{
		{fs, 64 * mib, 64 * mib},
		{fs, 64*mib + 1, 65 * mib},
		{fs, 100e6, 96 * mib}, // 100M is not whole MiB
		{fs, 1, minFSSize},
		{block, 1, mib},
		{block, 3*mib - 1, 3 * mib},
	} {
		if got := VolumeSize(tt.mode, tt.want); got != tt.size {
			t.Errorf("VolumeSize(%s, %d) = %d, want %d", tt.mode, tt.want, got, tt.size)
		}
	}
}

func claim(size string, mode corev1.PersistentVolumeMode, access ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	if len(access) == 0 {
		access = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
		Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: access, VolumeMode: &mode},
	}
	if size != "" {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	}
	return pvc
}

func TestRequestFor(t *testing.T) {
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	withSource := claim("1Gi", fs)
	withSource.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "other"}
	for _, tt := range []struct {
		name    string
		pvc     *corev1.PersistentVolumeClaim
		params  map[string]string
		want    Request
		wantErr string
	}{
		{name: "filesystem", pvc: claim("64Mi", fs), want: Request{Name: "pvc-1", Mode: fs, Size: 64 * mib}},
		{name: "block", pvc: claim("10Mi", block), want: Request{Name: "pvc-1", Mode: block, Size: 10 * mib}},
		{name: "no size", pvc: claim("", fs), wantErr: "spec.resources.requests.storage"},
		{name: "zero size", pvc: claim("0", fs), wantErr: "spec.resources.requests.storage"},
		{name: "data source", pvc: withSource, wantErr: "spec.dataSource"},
		{name: "read-only many", pvc: claim("1Gi", fs, corev1.ReadOnlyMany), wantErr: "spec.accessModes"},
		{name: "class parameters", pvc: claim("1Gi", fs), params: map[string]string{"zeta": "1", "fsType": "xfs"}, wantErr: "parameters.fsType"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			class := StorageClass("local")
			class.Parameters = tt.params
			got, err := RequestFor(controller.ProvisionOptions{PVName: "pvc-1", PVC: tt.pvc, StorageClass: class})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error naming %s", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestNewPV(t *testing.T) {
	fs := corev1.PersistentVolumeFilesystem
	retain := corev1.PersistentVolumeReclaimRetain
	retained := StorageClass("keep")
	retained.ReclaimPolicy = &retain
	for _, tt := range []struct {
		name      string
		pvc       *corev1.PersistentVolumeClaim
		class     *storagev1.StorageClass
		node      string
		op        corev1.NodeSelectorOperator
		values    []string
		reclaim   corev1.PersistentVolumeReclaimPolicy
		className string
	}{
		{name: "pinned to the selected node", pvc: claim("1Gi", fs), class: StorageClass("local"), node: "n1",
			op: corev1.NodeSelectorOpIn, values: []string{"n1"}, reclaim: corev1.PersistentVolumeReclaimDelete, className: "local"},
		{name: "no selected node: every node", pvc: claim("1Gi", fs), class: StorageClass("local"),
			op: corev1.NodeSelectorOpExists, reclaim: corev1.PersistentVolumeReclaimDelete, className: "local"},
		{name: "read-write-many: every node", pvc: claim("1Gi", fs, corev1.ReadWriteMany), class: StorageClass("local"), node: "n1",
			op: corev1.NodeSelectorOpExists, reclaim: corev1.PersistentVolumeReclaimDelete, className: "local"},
		{name: "the class's reclaim policy", pvc: claim("1Gi", fs), class: retained, node: "n2",
			op: corev1.NodeSelectorOpIn, values: []string{"n2"}, reclaim: retain, className: "keep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Name: "pvc-1", Mode: fs, Size: 64 * mib}
			pv := NewPV(controller.ProvisionOptions{PVName: "pvc-1", PVC: tt.pvc, StorageClass: tt.class, SelectedNodeName: tt.node}, req, "/vol/pvc-1/mount")
			if pv.Name != "pvc-1" || pv.Spec.Local == nil || pv.Spec.Local.Path != "/vol/pvc-1/mount" || *pv.Spec.VolumeMode != fs {
				t.Errorf("pv %+v", pv)
			}
			if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Value() != 64*mib {
				t.Errorf("capacity %s", got.String())
			}
			if pv.Spec.PersistentVolumeReclaimPolicy != tt.reclaim || pv.Spec.StorageClassName != tt.className {
				t.Errorf("reclaim %s class %s", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
			}
			req0 := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
			if req0.Key != corev1.LabelHostname || req0.Operator != tt.op || strings.Join(req0.Values, ",") != strings.Join(tt.values, ",") {
				t.Errorf("node affinity %+v", req0)
			}
		})
	}
}
