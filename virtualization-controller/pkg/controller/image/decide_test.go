package image_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
)

func TestDecide(t *testing.T) {
	now := metav1.Now()
	ready := func(c *v1alpha2.ClusterVirtualImage) {
		c.Status.Phase, c.Status.ObservedGeneration = v1alpha2.ImageReady, 1
	}
	cases := []struct {
		name  string
		short string
		img   image.Image
		pod   *corev1.Pod
		want  image.Step
	}{
		{"new image", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) { c.Finalizers = nil }), nil, image.StepAddFinalizer},
		{"new vi", "vi", viView(func(v *v1alpha2.VirtualImage) { v.Finalizers = nil }), nil, image.StepAddFinalizer},
		{"a cvi's finalizer on a vi", "vi", viView(func(v *v1alpha2.VirtualImage) { v.Finalizers = []string{image.Finalizer("cvi")} }), nil, image.StepAddFinalizer},
		{"no pod yet", "cvi", cviView(), nil, image.StepStart},
		{"vi, no pod yet", "vi", viView(), nil, image.StepStart},
		{"pod running", "cvi", cviView(), importer("1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), image.StepWatchProgress},
		{"vi pod running", "vi", viView(), importer("1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), image.StepWatchProgress},
		{"pod pending", "cvi", cviView(), importer("1"), image.StepWatchProgress},
		{"pod succeeded", "cvi", cviView(), importer("1", exited(`{"reason":"Completed"}`, 0)), image.StepRecordResult},
		{"container terminated, pod still running", "cvi", cviView(), importer("1", exited(`{"reason":"Completed"}`, 0), func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), image.StepRecordResult},
		{"pod failed", "cvi", cviView(), importer("1", exited(`{"reason":"ChecksumMismatch"}`, 20)), image.StepRecordResult},
		{"pod of an older image of that name", "cvi", cviView(), importer("0"), image.StepDeletePod},
		{"vi, pod of an older image of that name", "vi", viView(), importer("0"), image.StepDeletePod},
		{"ready, pod left", "cvi", cviView(ready), importer("1", exited("", 0)), image.StepDeletePod},
		{"ready", "cvi", cviView(ready), nil, image.StepNone},
		{"failed", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Status.Phase, c.Status.ObservedGeneration = v1alpha2.ImageFailed, 1
		}), nil, image.StepNone},
		{"ready for an older generation", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) { c.Status.Phase, c.Generation = v1alpha2.ImageReady, 2 }), nil, image.StepStart},
		{"pending: looks at its source again", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Status.Phase, c.Status.ObservedGeneration = v1alpha2.ImagePending, 1
		}), nil, image.StepStart},
		{"deleting with pod", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) { c.DeletionTimestamp = &now }), importer("1"), image.StepCleanup},
		{"deleting", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) { c.DeletionTimestamp = &now }), nil, image.StepCleanup},
		{"vi deleting", "vi", viView(func(v *v1alpha2.VirtualImage) { v.DeletionTimestamp = &now }), nil, image.StepCleanup},
		{"deleting, finalizer gone", "cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) { c.DeletionTimestamp, c.Finalizers = &now, nil }), nil, image.StepNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := image.Decide(tc.short, tc.img, tc.pod, nil); got != tc.want {
				t.Fatalf("Decide = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDecideExporter(t *testing.T) {
	ready := func(v *v1alpha2.VirtualImage) { v.Status.Phase, v.Status.ObservedGeneration = v1alpha2.ImageReady, 1 }
	running := func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }
	cases := []struct {
		name          string
		img           image.Image
		pod, exporter *corev1.Pod
		want          image.Step
	}{
		{"exporting, no importer yet", viView(), nil, importer("1", running), image.StepStart},
		{"both running", viView(), importer("1", running), importer("1", running), image.StepWatchProgress},
		{"exporter of an older image", viView(), nil, importer("0", running), image.StepDeletePod},
		{"ready, exporter left", viView(ready), nil, importer("1", running), image.StepDeletePod},
		{"failed, exporter left", viView(func(v *v1alpha2.VirtualImage) { v.Status.Phase, v.Status.ObservedGeneration = v1alpha2.ImageFailed, 1 }), nil, importer("1"), image.StepDeletePod},
		{"importer ended", viView(), importer("1", exited(`{"reason":"Completed"}`, 0)), importer("1", running), image.StepRecordResult},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := image.Decide("vi", tc.img, tc.pod, tc.exporter); got != tc.want {
				t.Fatalf("Decide = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCheckSource(t *testing.T) {
	ready := &image.RefState{UID: "src", Phase: "Ready", Repository: "cvi/base"}
	secret := &v1alpha2.ImagePullSecret{Name: "creds"}
	fromRegistry := func(v *v1alpha2.VirtualImage) {
		v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage,
			ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "registry.example/disk:1", ImagePullSecret: secret}}
	}
	fromRef := func(kind string) func(*v1alpha2.VirtualImage) {
		return func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
				ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: kind, Name: "base"}}
		}
	}
	cases := []struct {
		name       string
		img        image.Image
		lookup     image.Lookup
		wantReason string // "" for no blocker
		wantWait   bool
		wantMsg    string
	}{
		{"http", viView(), image.Lookup{}, "", false, ""},
		{"http with a caBundle", cviView(func(c *v1alpha2.ClusterVirtualImage) { c.Spec.DataSource.HTTP.CABundle = []byte("pem") }), image.Lookup{}, "", false, ""},
		{"upload", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}
		}), image.Lookup{}, "", false, ""},
		{"an unknown type", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: "FTP"}
		}), image.Lookup{}, "UnsupportedDataSource", false, "spec.dataSource.type FTP is not supported"},
		{"vi on a PVC", viView(func(v *v1alpha2.VirtualImage) { v.Spec.Storage = v1alpha2.StoragePersistentVolumeClaim }), image.Lookup{}, "", false, ""},
		{"an unknown storage", viView(func(v *v1alpha2.VirtualImage) { v.Spec.Storage = "Tape" }), image.Lookup{},
			"UnsupportedStorage", false, "spec.storage Tape is not supported: use ContainerRegistry or PersistentVolumeClaim"},
		{"registry, secret there", viView(fromRegistry), image.Lookup{PullSecretFound: true, PullSecret: []byte("{}")}, "", false, ""},
		{"registry, no pull secret", viView(fromRegistry), image.Lookup{}, "ContainerRegistrySecretNotFound", true, "the Secret ns1/creds of spec.dataSource.containerImage.imagePullSecret does not exist"},
		{"registry, pull secret of another type", viView(fromRegistry), image.Lookup{PullSecretFound: true}, "ContainerRegistrySecretNotFound", true, "has no .dockerconfigjson"},
		{"registry without a secret", viView(func(v *v1alpha2.VirtualImage) {
			fromRegistry(v)
			v.Spec.DataSource.ContainerImage.ImagePullSecret = nil
		}), image.Lookup{}, "", false, ""},
		{"cvi source ready", viView(fromRef("ClusterVirtualImage")), image.Lookup{Ref: ready}, "", false, ""},
		{"cvi source missing", viView(fromRef("ClusterVirtualImage")), image.Lookup{}, "ClusterImageNotReady", true, "the ClusterVirtualImage base of spec.dataSource.objectRef does not exist yet"},
		{"vi source provisioning", viView(fromRef("VirtualImage")), image.Lookup{Ref: &image.RefState{Phase: "Provisioning", Repository: "vi/ns1/base"}},
			"ImageNotReady", true, "the VirtualImage ns1/base of spec.dataSource.objectRef is Provisioning, not Ready yet"},
		{"vi source without a phase", viView(fromRef("VirtualImage")), image.Lookup{Ref: &image.RefState{}}, "ImageNotReady", true, "is Pending, not Ready yet"},
		{"vi source on a PVC, its claim not seen yet", viView(fromRef("VirtualImage")), image.Lookup{Ref: &image.RefState{Phase: "Ready"}}, "ImageNotReady", true, "has no PersistentVolumeClaim yet"},
		{"vi source on a PVC", viView(fromRef("VirtualImage")), image.Lookup{Ref: &image.RefState{Phase: "Ready", Disk: &image.DiskRef{Claim: "vi-base-x"}}}, "", false, ""},
		{"vd source ready", viView(fromRef("VirtualDisk")), image.Lookup{Ref: &image.RefState{Phase: "Ready", Disk: &image.DiskRef{Claim: "vd-base"}}}, "", false, ""},
		{"vd source missing", viView(fromRef("VirtualDisk")), image.Lookup{}, "VirtualDiskNotReady", true, "the VirtualDisk ns1/base of spec.dataSource.objectRef does not exist yet"},
		{"vd source provisioning", viView(fromRef("VirtualDisk")), image.Lookup{Ref: &image.RefState{Phase: "Provisioning"}}, "VirtualDiskNotReady", true, "is Provisioning, not Ready yet"},
		{"vd source without its claim", viView(fromRef("VirtualDisk")), image.Lookup{Ref: &image.RefState{Phase: "Ready"}}, "VirtualDiskNotReady", true, "has no PersistentVolumeClaim yet"},
		{"vd source in a running vm", viView(fromRef("VirtualDisk")), image.Lookup{Ref: &image.RefState{Phase: "Ready", Disk: &image.DiskRef{Claim: "vd-base", RunningVMs: []string{"web", "db"}}}},
			"VirtualDiskAttachedToRunningVM", true, "is in use by the running virtual machine web, db: the import starts once it is stopped"},
		{"an unknown kind", viView(fromRef("VirtualMachine")), image.Lookup{}, "UnsupportedDataSource", false, "spec.dataSource.objectRef.kind VirtualMachine is not supported: ClusterVirtualImage, VirtualImage and VirtualDisk are"},
		{"cvi from a vi of a namespace", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
				ObjectRef: &v1alpha2.ClusterVirtualImageObjectRef{Kind: "VirtualImage", Namespace: "ns2", Name: "base"}}
		}), image.Lookup{}, "ImageNotReady", true, "the VirtualImage ns2/base"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := image.CheckSource(tc.img, tc.lookup)
			switch {
			case b == nil && tc.wantReason == "":
			case b == nil || tc.wantReason == "":
				t.Fatalf("blocker %+v, want reason %q", b, tc.wantReason)
			case b.Reason != tc.wantReason || b.Wait != tc.wantWait || !strings.Contains(b.Message, tc.wantMsg):
				t.Fatalf("blocker %+v, want %s (wait %v) %q", b, tc.wantReason, tc.wantWait, tc.wantMsg)
			}
		})
	}
}

func TestWaitsForUpload(t *testing.T) {
	upload := func(phase v1alpha2.ImagePhase) image.Image {
		return viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource, v.Status.Phase = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}, phase
		})
	}
	cases := []struct {
		name string
		img  image.Image
		p    *importerprogress.Progress
		want bool
	}{
		{"nothing read", upload(v1alpha2.ImageWaitForUserUpload), &importerprogress.Progress{Ratio: -1}, true},
		{"bytes came", upload(v1alpha2.ImageWaitForUserUpload), &importerprogress.Progress{ReadBytes: 1}, false},
		{"progress unknown, waiting", upload(v1alpha2.ImageWaitForUserUpload), nil, true},
		{"progress unknown, uploading", upload(v1alpha2.ImageProvisioning), nil, false},
		{"not an upload", viView(), &importerprogress.Progress{}, false},
	}
	for _, tc := range cases {
		if got := image.WaitsForUpload(tc.img, tc.p); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

func TestInDVCR(t *testing.T) {
	for phase, want := range map[v1alpha2.ImagePhase]bool{"": false, v1alpha2.ImagePending: false, v1alpha2.ImageProvisioning: true, v1alpha2.ImageReady: true,
		v1alpha2.ImageFailed: false, v1alpha2.ImageWaitForUserUpload: true} {
		if got := image.InDVCR(cviView(func(c *v1alpha2.ClusterVirtualImage) { c.Status.Phase = phase })); got != want {
			t.Errorf("%q: %v, want %v", phase, got, want)
		}
	}
}

func TestRepository(t *testing.T) {
	if got := image.Repository("cvi", types.NamespacedName{Name: "a"}); got != "cvi/a" {
		t.Error(got)
	}
	if got := image.Repository("vi", types.NamespacedName{Namespace: "ns", Name: "a"}); got != "vi/ns/a" {
		t.Error(got)
	}
}
