package image_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/cvi"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
	"github.com/d8virt/virtualization-controller/pkg/controller/vi"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

type fixedProgress struct {
	p   importerprogress.Progress
	err error
	url string
}

func (f *fixedProgress) Scrape(_ context.Context, url string) (importerprogress.Progress, error) {
	f.url = url
	return f.p, f.err
}

type deletedImages struct {
	refs []string
	err  error
}

func (d *deletedImages) Delete(_ context.Context, ref string) error {
	d.refs = append(d.refs, ref)
	return d.err
}

// world is one image's reconciler on a fake API.
type world struct {
	t        *testing.T
	kind     image.Kind
	key      types.NamespacedName
	c        client.Client
	r        *image.Reconciler
	images   *deletedImages
	recorder *events.FakeRecorder
	progress *fixedProgress
	metrics  *image.ImportMetrics
}

func newWorld(t *testing.T, kind image.Kind, key types.NamespacedName, objs ...client.Object) *world {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha2.ClusterVirtualImage{}, &v1alpha2.VirtualImage{}).Build()
	w := &world{t: t, kind: kind, key: key, c: c, images: &deletedImages{}, recorder: events.NewFakeRecorder(20), metrics: image.NewImportMetrics(),
		progress: &fixedProgress{p: importerprogress.Progress{Ratio: 0.5, SpeedBytes: 2048, AverageSpeedBytes: 1024}}}
	w.r = image.NewReconciler(image.Config{Kind: kind, Client: c, APIReader: c, Pods: testConfig, Progress: w.progress, Images: w.images,
		Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Recorder: w.recorder, Metrics: w.metrics,
		NewToken: func() (string, error) { return "t0ken", nil },
		DVCRExporter: importerpod.DVCRExporter{Namespace: testConfig.Namespace, Image: testConfig.Image, PullerSecret: "dvcr-puller", TLSSecret: "dvcr-tls",
			Client: c, Reader: c, NewToken: func() (string, error) { return "exp0rt", nil }},
		ProgressInterval: 2 * time.Second, SourceInterval: 5 * time.Second})
	return w
}

func (w *world) reconcile() ctrl.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: w.key})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

func (w *world) image() image.Image {
	w.t.Helper()
	obj := w.kind.NewObject()
	if err := w.c.Get(context.Background(), w.key, obj); err != nil {
		w.t.Fatal(err)
	}
	return image.View(w.kind, obj)
}

func (w *world) gone() bool {
	err := w.c.Get(context.Background(), w.key, w.kind.NewObject())
	return apierrors.IsNotFound(err)
}

func (w *world) podName() string { return image.PodName(w.kind.Short(), w.key) }

func (w *world) pod() *corev1.Pod {
	p := &corev1.Pod{}
	if !w.importerObject(p) {
		return nil
	}
	return p
}

func (w *world) secret() *corev1.Secret {
	s := &corev1.Secret{}
	if !w.importerObject(s) {
		return nil
	}
	return s
}

// importerObject reads the importer's Pod or Secret into obj; false when there is none.
func (w *world) importerObject(obj client.Object) bool {
	w.t.Helper()
	err := w.c.Get(context.Background(), client.ObjectKey{Namespace: testConfig.Namespace, Name: w.podName()}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return true
}

func (w *world) event(want string) {
	w.t.Helper()
	select {
	case e := <-w.recorder.Events:
		if !strings.Contains(e, want) {
			w.t.Fatalf("event %q, want %q", e, want)
		}
	default:
		w.t.Fatalf("no event, want %q", want)
	}
}

func (w *world) finish(msg string, code int32) {
	w.t.Helper()
	p := w.pod()
	exited(msg, code)(p)
	if err := w.c.Status().Update(context.Background(), p); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) delete() {
	w.t.Helper()
	if err := w.c.Delete(context.Background(), w.image().Object); err != nil {
		w.t.Fatal(err)
	}
}

func condition(img image.Image, typ string) metav1.Condition {
	c := meta.FindStatusCondition(img.Status.Conditions, typ)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// kinds are the two kinds' "tiny" images, each run through the same tests.
var kinds = []struct {
	name string
	kind image.Kind
	key  types.NamespacedName
	obj  func() client.Object
	repo string
}{
	{"cvi", cvi.Kind{}, types.NamespacedName{Name: "tiny"}, func() client.Object { return cviImage(func(c *v1alpha2.ClusterVirtualImage) { c.Finalizers = nil }) }, "cvi/tiny"},
	{"vi", vi.Kind{}, types.NamespacedName{Namespace: "ns1", Name: "tiny"}, func() client.Object { return viImage(func(v *v1alpha2.VirtualImage) { v.Finalizers = nil }) }, "vi/ns1/tiny"},
}

func TestReconcileImportReady(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			w := newWorld(t, k.kind, k.key, k.obj())
			w.reconcile()
			if got := w.image().Object.GetFinalizers(); len(got) != 1 || got[0] != image.Finalizer(k.kind.Short()) {
				t.Fatalf("finalizers %v", got)
			}
			w.reconcile()
			if w.pod() == nil || w.image().Status.Phase != v1alpha2.ImageProvisioning || w.secret() != nil {
				t.Fatalf("no pod, a secret, or phase %s", w.image().Status.Phase)
			}
			w.event("Normal Provisioning Phase Provisioning")

			p := w.pod()
			p.Status.PodIP, p.Status.Phase = "10.66.0.7", corev1.PodRunning
			if err := w.c.Status().Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if res := w.reconcile(); res.RequeueAfter != 2*time.Second {
				t.Fatalf("requeue %v", res)
			}
			s := w.image().Status
			if w.progress.url != "http://10.66.0.7:8080/metrics" || s.Progress != "50.0%" || s.DownloadSpeed.CurrentBytes != "2048" || s.DownloadSpeed.Avg != "1.0Ki/s" {
				t.Fatalf("progress %q %+v from %s", s.Progress, s.DownloadSpeed, w.progress.url)
			}

			w.progress.err = errors.New("connection refused") // a scrape that fails leaves the status as it is
			w.reconcile()
			if w.image().Status.Progress != "50.0%" {
				t.Fatalf("progress %q", w.image().Status.Progress)
			}

			w.finish(`{"reason":"Completed","format":"qcow2","storedSize":18796544,"unpackedSize":26214400,"digest":"sha256:ab","sourceSize":16673048}`, 0)
			w.reconcile()
			s = w.image().Status
			if s.Phase != v1alpha2.ImageReady || s.Format != "qcow2" || s.Size.Stored != "17.9Mi" || s.Size.UnpackedBytes != "26214400" ||
				s.RegistryURL != "dvcr.d8-virtualization.svc/"+k.repo+":latest" || s.Progress != "100%" || s.ObservedGeneration != 1 || s.DownloadSpeed != nil {
				t.Fatalf("status %+v", s)
			}
			if w.pod() != nil {
				t.Fatal("importer pod left")
			}
			w.event("Normal Ready Phase Ready")
			if got := testutil.CollectAndCount(w.metrics.Collectors()[1], image.MetricImportSourceBytes); got != 1 {
				t.Fatalf("%d import byte series", got)
			}
			w.reconcile()
			if w.pod() != nil {
				t.Fatal("a ready image got a new importer")
			}

			w.delete()
			w.reconcile()
			if !w.gone() {
				t.Fatal("image not deleted")
			}
			if got := w.images.refs; len(got) != 1 || got[0] != "dvcr.d8-virtualization.svc:5000/"+k.repo+":latest" {
				t.Fatalf("deleted from DVCR: %v", got)
			}
		})
	}
}

// importing runs test for each kind with its image's import started.
func importing(t *testing.T, test func(t *testing.T, w *world, repo string)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			w := newWorld(t, k.kind, k.key, k.obj())
			w.reconcile()
			w.reconcile()
			w.event("Provisioning")
			test(t, w, k.repo)
		})
	}
}

func TestReconcileImportFailed(t *testing.T) {
	importing(t, func(t *testing.T, w *world, _ string) {
		w.finish(`{"reason":"ChecksumMismatch","message":"the sha256 checksum of the downloaded file is 0605..., but aaaa... was expected"}`, 20)
		w.reconcile()
		img := w.image()
		ready := condition(img, "Ready")
		if img.Status.Phase != v1alpha2.ImageFailed || ready.Reason != "ProvisioningFailed" || !strings.HasPrefix(ready.Message, "ChecksumMismatch: the sha256") || img.Status.RegistryURL != "" {
			t.Fatalf("status %+v", img.Status)
		}
		w.event("Warning Failed Phase Failed: ChecksumMismatch: the sha256")
		if w.pod() != nil {
			t.Fatal("importer pod left")
		}
		w.delete()
		w.reconcile()
		if len(w.images.refs) != 0 || !w.gone() {
			t.Fatalf("a failed import pushed nothing, yet DVCR was asked to delete %v (or the image stays)", w.images.refs)
		}
	})
}

func TestReconcileDeleteWhileImporting(t *testing.T) {
	importing(t, func(t *testing.T, w *world, repo string) {
		w.delete()
		w.reconcile() // the pod goes first
		if w.pod() != nil {
			t.Fatal("importer pod left")
		}
		w.images.err = errors.New("DVCR is down") // the image must leave DVCR before the finalizer goes
		if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: w.key}); err == nil {
			t.Fatal("finalizer removed while DVCR still holds the image")
		}
		ref := "dvcr.d8-virtualization.svc:5000/" + repo + ":latest"
		w.event("Warning FailedDeleteImage Error deleting " + ref + " from DVCR: DVCR is down")
		w.images.err = nil
		w.reconcile() // then the image in DVCR and the finalizer
		if got := w.images.refs; len(got) != 2 || got[1] != ref {
			t.Fatalf("deleted from DVCR: %v", got)
		}
		if !w.gone() {
			t.Fatal("image not deleted")
		}
	})
}

func TestReconcileUnsupportedSource(t *testing.T) {
	w := newWorld(t, vi.Kind{}, types.NamespacedName{Namespace: "ns1", Name: "tiny"}, viImage(func(v *v1alpha2.VirtualImage) {
		v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
			ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: "VirtualMachine", Name: "d"}}
	}))
	if res := w.reconcile(); res.RequeueAfter != 0 {
		t.Fatalf("an unsupported source is not looked at again: %v", res)
	}
	img := w.image()
	if img.Status.Phase != v1alpha2.ImagePending || w.pod() != nil || !strings.Contains(condition(img, "DatasourceReady").Message, "spec.dataSource.objectRef.kind VirtualMachine is not supported") {
		t.Fatalf("status %+v", img.Status)
	}
	w.event("Normal Pending Phase Pending: the import has not started: spec.dataSource.objectRef.kind VirtualMachine")
}

// A ClusterVirtualImage from a VirtualDisk: while a running machine has the disk it waits; then
// an exporter next to the claim serves it and the importer reads it with the exporter's token;
// the exporter goes with the importer.
func TestReconcileFromVirtualDisk(t *testing.T) {
	for _, block := range []bool{false, true} {
		t.Run(map[bool]string{false: "Filesystem", true: "Block"}[block], func(t *testing.T) {
			mode := corev1.PersistentVolumeFilesystem
			if block {
				mode = corev1.PersistentVolumeBlock
			}
			vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "base", UID: "vd-uid"},
				Status: v1alpha2.VirtualDiskStatus{Phase: v1alpha2.DiskReady, Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: "vd-base-1"},
					AttachedToVirtualMachines: []v1alpha2.AttachedVirtualMachine{{Name: "web", Mounted: true}}}}
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vd-base-1"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: &mode}}
			w := newWorld(t, cvi.Kind{}, types.NamespacedName{Name: "tiny"}, vd, claim, cviImage(func(c *v1alpha2.ClusterVirtualImage) {
				c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef,
					ObjectRef: &v1alpha2.ClusterVirtualImageObjectRef{Kind: "VirtualDisk", Namespace: "ns1", Name: "base"}}
			}))
			exporterKey := client.ObjectKey{Namespace: "ns1", Name: "cvi-exporter-tiny"}
			exporter := func() *corev1.Pod {
				p := &corev1.Pod{}
				if err := w.c.Get(context.Background(), exporterKey, p); err != nil {
					return nil
				}
				return p
			}
			if res := w.reconcile(); res.RequeueAfter != 5*time.Second || w.image().Status.Phase != v1alpha2.ImagePending || exporter() != nil {
				t.Fatalf("in use by a running machine: %v %+v", res, w.image().Status)
			}
			if c := condition(w.image(), "DatasourceReady"); c.Reason != "VirtualDiskAttachedToRunningVM" || !strings.Contains(c.Message, "the running virtual machine web") {
				t.Fatalf("condition %+v", c)
			}
			w.event("Normal Pending")

			vd.Status.AttachedToVirtualMachines[0].Mounted = false // the machine stopped
			if err := w.c.Update(context.Background(), vd); err != nil {
				t.Fatal(err)
			}
			w.reconcile()
			p := exporter()
			if p == nil || w.pod() != nil || w.image().Status.Phase != v1alpha2.ImageProvisioning {
				t.Fatalf("exporter %v, importer %v, phase %s", p != nil, w.pod() != nil, w.image().Status.Phase)
			}
			if p.OwnerReferences[0].Kind != "ClusterVirtualImage" || p.Spec.Volumes[1].PersistentVolumeClaim.ClaimName != "vd-base-1" {
				t.Fatalf("exporter %+v", p)
			}
			wantFile := "--export-file=/source/disk.img"
			if block {
				wantFile = "--export-file=/dev/source"
			}
			if !strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), wantFile) {
				t.Fatalf("exporter args %v", p.Spec.Containers[0].Args)
			}
			w.reconcile() // not ready yet: no importer
			if w.pod() != nil {
				t.Fatal("importer before the exporter is ready")
			}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.2.3", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			if err := w.c.Status().Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			w.reconcile()
			pod := w.pod()
			if pod == nil {
				t.Fatal("no importer")
			}
			args := strings.Join(pod.Spec.Containers[0].Args, " ")
			if !strings.Contains(args, "--source-url=http://10.1.2.3:8090/export --source-token-file=/etc/importer/source/export-token") {
				t.Fatalf("importer args %s", args)
			}
			if got := string(w.secret().Data["export-token"]); got != "t0ken" {
				t.Fatalf("importer's token %q", got)
			}
			w.finish(`{"reason":"Completed","format":"raw","unpackedSize":1048576,"storedSize":1000}`, 0)
			w.reconcile()
			if w.image().Status.Phase != v1alpha2.ImageReady || w.pod() != nil || exporter() != nil {
				t.Fatalf("phase %s, importer %v, exporter %v", w.image().Status.Phase, w.pod() != nil, exporter() != nil)
			}
			if err := w.c.Get(context.Background(), exporterKey, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				t.Fatalf("exporter secret: %v", err)
			}
		})
	}
}

// An Upload source: a token, the uploader Pod with its Secret and Service, WaitForUserUpload
// with the URL until bytes come, then the result; nothing left.
func TestReconcileUpload(t *testing.T) {
	for _, tc := range []struct {
		name       string
		result     string
		code       int32
		wantPhase  v1alpha2.ImagePhase
		wantReason string
	}{
		{"uploaded", `{"reason":"Completed","format":"qcow2","storedSize":1024,"unpackedSize":4096}`, 0, v1alpha2.ImageReady, "Ready"},
		{"never came", `{"reason":"UploadTimeout","message":"no upload began within 1h0m0s: ..."}`, 14, v1alpha2.ImageFailed, "WaitForUserUploadTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := types.NamespacedName{Namespace: "ns1", Name: "tiny"}
			w := newWorld(t, vi.Kind{}, key, viImage(func(v *v1alpha2.VirtualImage) {
				v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}
			}))
			w.reconcile() // the token
			if got := w.image().Object.GetAnnotations()[importerpod.AnnotationUploadToken]; got != "t0ken" {
				t.Fatalf("token %q", got)
			}
			w.reconcile()
			if s := w.secret(); s == nil || string(s.Data["upload-token"]) != "t0ken" || w.pod() == nil {
				t.Fatalf("secret %+v", s)
			}
			svc := &corev1.Service{}
			svcKey := client.ObjectKey{Namespace: testConfig.Namespace, Name: image.ServiceName("vi", key)}
			if err := w.c.Get(context.Background(), svcKey, svc); err != nil {
				t.Fatal(err)
			}
			// No URL until the uploader is ready: an upload before that would be refused.
			if img := w.image(); img.Status.Phase != v1alpha2.ImagePending || img.Status.ImageUploadURLs != nil ||
				condition(img, "Ready").Reason != "ProvisioningNotStarted" {
				t.Fatalf("status while the uploader starts %+v", img.Status)
			}
			w.event("Normal Pending Phase Pending: the uploader is starting")
			p := w.pod()
			p.Status.PodIP, p.Status.Phase = "10.66.0.7", corev1.PodRunning
			if err := w.c.Status().Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			w.reconcile()
			if got := w.image().Status; got.Phase != v1alpha2.ImagePending || got.ImageUploadURLs != nil {
				t.Fatalf("status with the uploader running, not ready %+v", got)
			}

			p = w.pod()
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if err := w.c.Status().Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			w.progress.p = importerprogress.Progress{Ratio: -1}
			w.reconcile()
			img := w.image()
			if img.Status.Phase != v1alpha2.ImageWaitForUserUpload || img.Status.ImageUploadURLs == nil ||
				img.Status.ImageUploadURLs.InCluster != "http://"+svc.Name+".d8-virtualization.svc/upload" ||
				!strings.Contains(condition(img, "Ready").Message, "curl -T disk.qcow2") {
				t.Fatalf("status %+v", img.Status)
			}
			w.event("Normal WaitForUserUpload")
			w.progress.p = importerprogress.Progress{Ratio: 0.25, ReadBytes: 1024}
			w.reconcile()
			if s := w.image().Status; s.Phase != v1alpha2.ImageProvisioning || s.Progress != "25.0%" {
				t.Fatalf("status %+v", s)
			}
			w.event("Normal Provisioning")

			w.finish(tc.result, tc.code)
			w.reconcile()
			img = w.image()
			if c := condition(img, "Ready"); img.Status.Phase != tc.wantPhase || c.Reason != tc.wantReason || img.Status.ImageUploadURLs != nil {
				t.Fatalf("phase %s, Ready %+v", img.Status.Phase, c)
			}
			if err := w.c.Get(context.Background(), svcKey, &corev1.Service{}); !apierrors.IsNotFound(err) || w.pod() != nil || w.secret() != nil {
				t.Fatalf("the uploader's pod, secret or service left (%v)", err)
			}
		})
	}
}

// A vi from a cvi waits until the cvi exists and is Ready, then reads it from DVCR.
func TestReconcileWaitsForItsSource(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns1", Name: "tiny"}
	w := newWorld(t, vi.Kind{}, key, viImage(func(v *v1alpha2.VirtualImage) {
		v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: "ClusterVirtualImage", Name: "base"}}
	}))
	if res := w.reconcile(); res.RequeueAfter != 5*time.Second {
		t.Fatalf("requeue %v", res)
	}
	c := condition(w.image(), "DatasourceReady")
	if c.Reason != "ClusterImageNotReady" || !strings.Contains(c.Message, "the ClusterVirtualImage base of spec.dataSource.objectRef does not exist yet") || w.pod() != nil {
		t.Fatalf("condition %+v", c)
	}
	w.event("Normal Pending")

	base := cviImage(func(c *v1alpha2.ClusterVirtualImage) { c.Name, c.UID = "base", "uid-base" })
	if err := w.c.Create(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if c := condition(w.image(), "DatasourceReady"); !strings.Contains(c.Message, "is Pending, not Ready yet") || w.pod() != nil {
		t.Fatalf("condition %+v", c)
	}
	base.Status.Phase = v1alpha2.ImageReady
	if err := w.c.Status().Update(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	img := w.image()
	if img.Status.Phase != v1alpha2.ImageProvisioning || img.Status.SourceUID == nil || *img.Status.SourceUID != "uid-base" {
		t.Fatalf("status %+v", img.Status)
	}
	if args := w.pod().Spec.Containers[0].Args; args[2] != "--source-image=dvcr.d8-virtualization.svc:5000/cvi/base:latest" {
		t.Fatalf("args %q", args)
	}
}

// A registry source waits for its pull secret; the importer reads a copy of it, which goes
// with the importer.
func TestReconcilePullSecret(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns1", Name: "tiny"}
	w := newWorld(t, vi.Kind{}, key, viImage(func(v *v1alpha2.VirtualImage) {
		v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage,
			ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "reg.example/d:1", ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "creds"}}}
	}))
	w.reconcile()
	if c := condition(w.image(), "DatasourceReady"); c.Reason != "ContainerRegistrySecretNotFound" || !strings.Contains(c.Message, "ns1/creds") || w.pod() != nil {
		t.Fatalf("condition %+v", c)
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.example":{"auth":"dTpw"}}}`)}}
	if err := w.c.Create(context.Background(), creds); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	s := w.secret()
	if s == nil || string(s.Data[corev1.DockerConfigJsonKey]) != string(creds.Data[corev1.DockerConfigJsonKey]) || w.pod() == nil {
		t.Fatalf("copy %+v", s)
	}
	w.finish(`{"reason":"SourceForbidden","message":"the registry refused the credentials"}`, 12)
	w.reconcile()
	if w.pod() != nil || w.secret() != nil {
		t.Fatal("the importer or its secret left")
	}
	if c := condition(w.image(), "Ready"); !strings.HasPrefix(c.Message, "SourceForbidden") {
		t.Fatalf("condition %+v", c)
	}
}

func TestPhaseCollector(t *testing.T) {
	w := newWorld(t, vi.Kind{}, types.NamespacedName{Namespace: "ns1", Name: "tiny"}, viImage(func(v *v1alpha2.VirtualImage) { v.Status.Phase = v1alpha2.ImageReady }))
	c := image.NewPhaseCollector(vi.Kind{}, w.c)
	want := `
# HELP d8_virtualization_virtualimage_status_phase The phase of a VirtualImage: 1 for its phase, 0 for the others.
# TYPE d8_virtualization_virtualimage_status_phase gauge
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="Failed"} 0
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="ImageLost"} 0
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="PVCLost"} 0
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="Pending"} 0
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="Provisioning"} 0
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="Ready"} 1
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="Terminating"} 0
d8_virtualization_virtualimage_status_phase{name="tiny",namespace="ns1",phase="WaitForUserUpload"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if got := image.MetricStatusPhase(cvi.Kind{}); got != "d8_virtualization_clustervirtualimage_status_phase" {
		t.Fatal(got)
	}
	if err := prometheus.NewPedanticRegistry().Register(image.NewPhaseCollector(cvi.Kind{}, w.c)); err != nil {
		t.Fatal(err)
	}
}

func TestPhaseValues(t *testing.T) {
	v := phasegauge.Values(image.Phases, image.GaugePhase(cviView()))
	if len(v) != len(image.Phases) || v[v1alpha2.ImagePending] != 1 {
		t.Fatalf("%v", v)
	}
	v = phasegauge.Values(image.Phases, image.GaugePhase(cviView(func(c *v1alpha2.ClusterVirtualImage) { c.Status.Phase = v1alpha2.ImageReady })))
	if v[v1alpha2.ImageReady] != 1 || v[v1alpha2.ImagePending] != 0 {
		t.Fatalf("%v", v)
	}
	now := metav1.Now()
	v = phasegauge.Values(image.Phases, image.GaugePhase(viView(func(vi *v1alpha2.VirtualImage) { vi.Status.Phase, vi.DeletionTimestamp = v1alpha2.ImageReady, &now })))
	if v[v1alpha2.ImageTerminating] != 1 || v[v1alpha2.ImageReady] != 0 {
		t.Fatalf("%v", v)
	}
}

// A VirtualImage kept on a claim: its class is checked first, then it is imported into DVCR,
// then a filler copies it into a claim of its namespace from an exporter in the module's
// namespace, holding only the export's token; the DVCR copy goes, the image is Ready on the
// claim, the filler and the exporter go and the claim stays.
func TestReconcileOnClaim(t *testing.T) {
	onClaim := viImage(func(v *v1alpha2.VirtualImage) { v.Spec.Storage = v1alpha2.StoragePersistentVolumeClaim })
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local", Annotations: map[string]string{storageclass.AnnotationDefault: "true"}}, Provisioner: "x"}
	w := newWorld(t, vi.Kind{}, types.NamespacedName{Namespace: "ns1", Name: "tiny"}, onClaim)

	if res := w.reconcile(); w.image().Status.Phase != v1alpha2.ImagePending || res.RequeueAfter != 5*time.Second || w.pod() != nil {
		t.Fatalf("without a default class: %v %+v", res, w.image().Status)
	}
	if c := condition(w.image(), "StorageClassReady"); c.Reason != "StorageClassNotFound" || !strings.Contains(c.Message, "no default StorageClass") {
		t.Fatalf("condition %+v", c)
	}
	w.event("Normal Pending")
	if err := w.c.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if w.pod() == nil || w.image().Status.Phase != v1alpha2.ImageProvisioning {
		t.Fatalf("no importer, phase %s", w.image().Status.Phase)
	}
	w.finish(`{"reason":"Completed","format":"qcow2","unpackedSize":26214401,"storedSize":1000}`, 0)
	w.reconcile()
	img := w.image()
	if img.Status.Phase != v1alpha2.ImageProvisioning || img.Status.Size.UnpackedBytes != "26214401" || img.Status.RegistryURL != "" || w.pod() != nil {
		t.Fatalf("imported: %+v, importer %v", img.Status, w.pod() != nil)
	}
	w.reconcile() // the claim and the exporter's Secret
	w.reconcile() // the exporter
	exporterKey := client.ObjectKey{Namespace: testConfig.Namespace, Name: image.FillerExporterName("vi", w.image())}
	exporter := &corev1.Pod{}
	if err := w.c.Get(context.Background(), exporterKey, exporter); err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(exporter.Spec.Containers[0].Args, " "); !strings.Contains(args, "--export-image=dvcr.d8-virtualization.svc/vi/ns1/tiny:latest") {
		t.Fatalf("exporter args %s", args)
	}
	if exporter.Labels[image.LabelImageUID] != "uid-1" || exporter.Annotations[image.AnnotationImageNamespace] != "ns1" {
		t.Fatalf("the exporter is not found as the image's: %+v", exporter.ObjectMeta)
	}
	if res := w.reconcile(); res.RequeueAfter == 0 {
		t.Fatal("the filler does not wait for its exporter")
	}
	exporter.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := w.c.Status().Update(context.Background(), exporter); err != nil {
		t.Fatal(err)
	}
	w.reconcile() // the filler
	claim := &corev1.PersistentVolumeClaim{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "ns1", Name: "vi-tiny-uid-1"}, claim); err != nil {
		t.Fatal(err)
	}
	if request := claim.Spec.Resources.Requests[corev1.ResourceStorage]; request.String() != "26Mi" || *claim.Spec.StorageClassName != "local" || claim.OwnerReferences[0].UID != "uid-1" {
		t.Fatalf("claim %+v", claim)
	}
	filler := &corev1.Pod{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "ns1", Name: "vi-filler-tiny"}, filler); err != nil {
		t.Fatal(err)
	}
	args := strings.Join(filler.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--source-url=http://10.0.0.9:8090/export --source-token-file=/etc/importer/source/export-token") || !strings.Contains(args, "--destination-file=/data/disk.img --capacity=26214401") {
		t.Fatalf("filler args %s", args)
	}
	secret := &corev1.Secret{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "ns1", Name: "vi-filler-tiny"}, secret); err != nil || string(secret.Data["export-token"]) != "exp0rt" || len(secret.Data) != 1 {
		t.Fatalf("filler secret %+v %v: only the export's token", secret.Data, err)
	}
	if s := w.image().Status; s.ClaimName != "vi-tiny-uid-1" || s.StorageClassName != "local" {
		t.Fatalf("filling: %+v", s)
	}
	exited(`{"reason":"Completed","format":"raw","storedSize":4096}`, 0)(filler)
	if err := w.c.Status().Update(context.Background(), filler); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	img = w.image()
	if img.Status.Phase != v1alpha2.ImageReady || img.Status.ClaimName != "vi-tiny-uid-1" || img.Status.Size.StoredBytes != "4096" || img.Status.Format != "qcow2" {
		t.Fatalf("filled: %+v", img.Status)
	}
	if got := w.images.refs; len(got) != 1 || got[0] != "dvcr.d8-virtualization.svc:5000/vi/ns1/tiny:latest" {
		t.Fatalf("deleted from DVCR: %v", got)
	}
	w.reconcile() // the filler goes
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "ns1", Name: "vi-filler-tiny"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("filler left: %v", err)
	}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: "ns1", Name: "vi-filler-tiny"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("filler secret left: %v", err)
	}
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Secret{}} {
		if err := w.c.Get(context.Background(), exporterKey, o); !apierrors.IsNotFound(err) {
			t.Fatalf("the exporter's %T is left: %v", o, err)
		}
	}
	if image.InDVCR(w.image()) {
		t.Fatal("a Ready image on a claim is not in DVCR")
	}
}
