package cvi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
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

type world struct {
	images   *deletedImages
	t        *testing.T
	c        client.Client
	r        *Reconciler
	recorder *events.FakeRecorder
	progress *fixedProgress
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha2.ClusterVirtualImage{}).Build()
	w := &world{t: t, c: c, images: &deletedImages{}, recorder: events.NewFakeRecorder(20), progress: &fixedProgress{p: importerprogress.Progress{Ratio: 0.5, SpeedBytes: 2048, AverageSpeedBytes: 1024}}}
	w.r = NewReconciler(c, c, testConfig, w.progress, w.images, clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), w.recorder, 2*time.Second)
	return w
}

func (w *world) reconcile() ctrl.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "tiny"}})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

func (w *world) image() *v1alpha2.ClusterVirtualImage {
	w.t.Helper()
	c := &v1alpha2.ClusterVirtualImage{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "tiny"}, c); err != nil {
		w.t.Fatal(err)
	}
	return c
}

func (w *world) pod() *corev1.Pod {
	w.t.Helper()
	p := &corev1.Pod{}
	err := w.c.Get(context.Background(), client.ObjectKey{Namespace: testConfig.Namespace, Name: "cvi-importer-tiny"}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return p
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

func TestReconcileImportReady(t *testing.T) {
	w := newWorld(t, image(func(c *v1alpha2.ClusterVirtualImage) { c.Finalizers = nil }))
	w.reconcile()
	if got := w.image().Finalizers; len(got) != 1 || got[0] != Finalizer {
		t.Fatalf("finalizers %v", got)
	}
	w.reconcile()
	if w.pod() == nil || w.image().Status.Phase != v1alpha2.ImageProvisioning {
		t.Fatalf("no pod or phase %s", w.image().Status.Phase)
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

	w.finish(`{"reason":"Completed","format":"qcow2","storedSize":18796544,"unpackedSize":26214400,"digest":"sha256:ab"}`, 0)
	w.reconcile()
	s = w.image().Status
	if s.Phase != v1alpha2.ImageReady || s.Format != "qcow2" || s.Size.Stored != "17.9Mi" || s.Size.UnpackedBytes != "26214400" ||
		s.Target.RegistryURL != "dvcr.d8-virtualization.svc/cvi/tiny:latest" || s.Progress != "100%" || s.ObservedGeneration != 1 || s.DownloadSpeed != nil {
		t.Fatalf("status %+v", s)
	}
	if w.pod() != nil {
		t.Fatal("importer pod left")
	}
	w.event("Normal Ready Phase Ready")
	w.reconcile()
	if w.pod() != nil {
		t.Fatal("a ready image got a new importer")
	}

	if err := w.c.Delete(context.Background(), w.image()); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "tiny"}, &v1alpha2.ClusterVirtualImage{}); !apierrors.IsNotFound(err) {
		t.Fatalf("image not deleted: %v", err)
	}
}

func TestReconcileImportFailed(t *testing.T) {
	w := newWorld(t, image())
	w.reconcile()
	w.event("Provisioning")
	w.finish(`{"reason":"ChecksumMismatch","message":"the sha256 checksum of the downloaded file is 0605..., but aaaa... was expected"}`, 20)
	w.reconcile()
	s := w.image().Status
	ready := s.Conditions[len(s.Conditions)-1]
	if s.Phase != v1alpha2.ImageFailed || ready.Type != "Ready" || ready.Reason != "ProvisioningFailed" || !strings.HasPrefix(ready.Message, "ChecksumMismatch: the sha256") {
		t.Fatalf("status %+v", s)
	}
	w.event("Warning Failed Phase Failed: ChecksumMismatch: the sha256")
	if w.pod() != nil {
		t.Fatal("importer pod left")
	}
	if err := w.c.Delete(context.Background(), w.image()); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if len(w.images.refs) != 0 {
		t.Fatalf("a failed import pushed nothing, yet DVCR was asked to delete %v", w.images.refs)
	}
}

func TestReconcileDeleteWhileImporting(t *testing.T) {
	w := newWorld(t, image())
	w.reconcile()
	w.event("Provisioning")
	if err := w.c.Delete(context.Background(), w.image()); err != nil {
		t.Fatal(err)
	}
	w.reconcile() // the pod goes first
	if w.pod() != nil {
		t.Fatal("importer pod left")
	}
	w.images.err = errors.New("DVCR is down") // the image must leave DVCR before the finalizer goes
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "tiny"}}); err == nil {
		t.Fatal("finalizer removed while DVCR still holds the image")
	}
	w.event("Warning FailedDeleteImage Error deleting dvcr.d8-virtualization.svc:5000/cvi/tiny:latest from DVCR: DVCR is down")
	w.images.err = nil
	w.reconcile() // then the image in DVCR and the finalizer
	if got := w.images.refs; len(got) != 2 || got[1] != "dvcr.d8-virtualization.svc:5000/cvi/tiny:latest" {
		t.Fatalf("deleted from DVCR: %v", got)
	}
	if err := w.c.Get(context.Background(), client.ObjectKey{Name: "tiny"}, &v1alpha2.ClusterVirtualImage{}); !apierrors.IsNotFound(err) {
		t.Fatalf("image not deleted: %v", err)
	}
}

func TestReconcileUnsupportedSource(t *testing.T) {
	w := newWorld(t, image(func(c *v1alpha2.ClusterVirtualImage) {
		c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}
	}))
	w.reconcile()
	s := w.image().Status
	if s.Phase != v1alpha2.ImagePending || w.pod() != nil || !strings.Contains(s.Conditions[0].Message, "spec.dataSource.type Upload is not supported") {
		t.Fatalf("status %+v", s)
	}
}

func TestPhaseValues(t *testing.T) {
	v := PhaseValues(image())
	if len(v) != len(Phases) || v[v1alpha2.ImagePending] != 1 {
		t.Fatalf("%v", v)
	}
	v = PhaseValues(image(func(c *v1alpha2.ClusterVirtualImage) { c.Status.Phase = v1alpha2.ImageReady }))
	if v[v1alpha2.ImageReady] != 1 || v[v1alpha2.ImagePending] != 0 {
		t.Fatalf("%v", v)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0Ki", 18796544: "17.9Mi", 1 << 30: "1.0Gi"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %s, want %s", n, got, want)
		}
	}
}
