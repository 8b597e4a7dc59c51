package provisioner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/d8virt/devstack/provisioner/hostvol"
)

// fakeStore records what the provisioner and the resizer ask of the volumes.
type fakeStore struct {
	sizes   map[string]int64
	ensured []string
	inUse   bool // ResizeFS answers ErrInUse
	resized []string
}

func newFakeStore() *fakeStore { return &fakeStore{sizes: map[string]int64{}} }

func (f *fakeStore) Path(name string, mode corev1.PersistentVolumeMode) string {
	return "/v/" + name + "/" + string(mode)
}
func (f *fakeStore) Exists(name string) bool { _, ok := f.sizes[name]; return ok }
func (f *fakeStore) Create(_ context.Context, name string, _ corev1.PersistentVolumeMode, size int64) error {
	f.sizes[name] = size
	return nil
}
func (f *fakeStore) Ensure(_ context.Context, name string, _ corev1.PersistentVolumeMode) error {
	f.ensured = append(f.ensured, name)
	return nil
}
func (f *fakeStore) Grow(_ context.Context, name string, _ corev1.PersistentVolumeMode, size int64) error {
	if f.sizes[name] < size {
		f.sizes[name] = size
	}
	return nil
}
func (f *fakeStore) ResizeFS(_ context.Context, name string) error {
	if f.inUse {
		return hostvol.ErrInUse
	}
	f.resized = append(f.resized, name)
	return nil
}
func (f *fakeStore) Remove(_ context.Context, name string) error { delete(f.sizes, name); return nil }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestProvisionAndDelete(t *testing.T) {
	store := newFakeStore()
	p := New(store, quiet)
	ctx := context.Background()
	opts := controller.ProvisionOptions{PVName: "pvc-1", PVC: claim("20Mi", corev1.PersistentVolumeBlock), StorageClass: StorageClass("local"), SelectedNodeName: "n1"}
	pv, state, err := p.Provision(ctx, opts)
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("provision: %v %v", state, err)
	}
	if store.sizes["pvc-1"] != 20*mib || pv.Spec.Local.Path != "/v/pvc-1/Block" {
		t.Errorf("store %v, pv path %s", store.sizes, pv.Spec.Local.Path)
	}
	opts.PVC = claim("", corev1.PersistentVolumeFilesystem)
	if _, state, err := p.Provision(ctx, opts); err == nil || state != controller.ProvisioningFinished {
		t.Errorf("a claim without a size: %v %v", state, err)
	}
	var ignored *controller.IgnoredError
	if err := p.Delete(ctx, pv); !errors.As(err, &ignored) {
		t.Errorf("delete of a PV without the provisioned-by annotation: %v", err)
	}
	pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": Name}
	if err := p.Delete(ctx, pv); err != nil || store.Exists("pvc-1") {
		t.Errorf("delete: %v, store %v", err, store.sizes)
	}
}

func TestRecover(t *testing.T) {
	store := newFakeStore()
	store.sizes["pvc-a"], store.sizes["pvc-b"] = mib, mib
	ours := func(name string) corev1.PersistentVolume {
		_, pv := boundPair(corev1.PersistentVolumeFilesystem, mib, mib, mib)
		pv.Name = name
		return *pv
	}
	other := ours("pvc-b")
	other.Annotations = nil
	if err := Recover(context.Background(), store, []corev1.PersistentVolume{ours("pvc-a"), other, ours("pvc-lost")}, quiet); err != nil {
		t.Fatal(err)
	}
	if strings.Join(store.ensured, ",") != "pvc-a" {
		t.Errorf("attached %v, want only pvc-a (pvc-b is another provisioner's, pvc-lost has no file)", store.ensured)
	}
}

func TestEnsureStorageClass(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	if err := EnsureStorageClass(ctx, kube, StorageClass("local")); err != nil {
		t.Fatal(err)
	}
	// Someone turned it off as the default: it is the default again.
	got, _ := kube.StorageV1().StorageClasses().Get(ctx, "local", metav1.GetOptions{})
	got.Annotations[DefaultClassAnnotation] = "false"
	if _, err := kube.StorageV1().StorageClasses().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStorageClass(ctx, kube, StorageClass("local")); err != nil {
		t.Fatal(err)
	}
	if got, _ = kube.StorageV1().StorageClasses().Get(ctx, "local", metav1.GetOptions{}); got.Annotations[DefaultClassAnnotation] != "true" {
		t.Errorf("annotations %v", got.Annotations)
	}
	foreign := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "taken"}, Provisioner: "example.com/other"}
	if _, err := kube.StorageV1().StorageClasses().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStorageClass(ctx, kube, StorageClass("taken")); err == nil || !strings.Contains(err.Error(), "example.com/other") {
		t.Errorf("a class of another provisioner: %v", err)
	}
}

// The resizer's steps on a fake API: a Block claim grows at once; a Filesystem claim waits with
// FileSystemResizePending while its file system is in use, and finishes when it is not.
func TestResizerSync(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		mode    corev1.PersistentVolumeMode
		inUse   bool
		wantErr error
		cap     int64
		cond    corev1.PersistentVolumeClaimConditionType
	}{
		{name: "block", mode: corev1.PersistentVolumeBlock, cap: 2 * mib},
		{name: "filesystem not in use", mode: corev1.PersistentVolumeFilesystem, cap: 32 * mib},
		{name: "filesystem in use", mode: corev1.PersistentVolumeFilesystem, inUse: true, wantErr: hostvol.ErrInUse,
			cap: 16 * mib, cond: corev1.PersistentVolumeClaimFileSystemResizePending},
	} {
		t.Run(tt.name, func(t *testing.T) {
			size := VolumeSize(tt.mode, 1)
			pvc, pv := boundPair(tt.mode, 2*size, size, size)
			kube := fake.NewClientset(pvc, pv)
			store := newFakeStore()
			store.sizes[pv.Name], store.inUse = size, tt.inUse
			r, err := NewResizer(kube, informers.NewSharedInformerFactory(kube, 0), store, record.NewFakeRecorder(10), quiet,
				func() time.Time { return time.Unix(1e9, 0) })
			if err != nil {
				t.Fatal(err)
			}
			if err := r.sync(ctx, "ns/data"); !errors.Is(err, tt.wantErr) {
				t.Fatalf("sync: %v, want %v", err, tt.wantErr)
			}
			got, _ := kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
			gotPV, _ := kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if c := storageOf(got.Status.Capacity); c != tt.cap {
				t.Errorf("status.capacity %d, want %d", c, tt.cap)
			}
			if c := storageOf(gotPV.Spec.Capacity); c != 2*size || store.sizes[pv.Name] != 2*size {
				t.Errorf("pv capacity %d, volume %d, want %d", c, store.sizes[pv.Name], 2*size)
			}
			if storageOf(got.Status.AllocatedResources) != 2*size {
				t.Errorf("allocatedResources %v", got.Status.AllocatedResources)
			}
			var conds []corev1.PersistentVolumeClaimConditionType
			for _, c := range got.Status.Conditions {
				conds = append(conds, c.Type)
			}
			if (tt.cond == "" && len(conds) != 0) || (tt.cond != "" && (len(conds) != 1 || conds[0] != tt.cond)) {
				t.Errorf("conditions %v, want %q", conds, tt.cond)
			}
		})
	}
}
