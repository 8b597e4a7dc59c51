package vd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

type fixedProgress struct {
	p   importerprogress.Progress
	err error
}

func (f *fixedProgress) Scrape(context.Context, string) (importerprogress.Progress, error) {
	return f.p, f.err
}

type world struct {
	t        *testing.T
	c        client.Client
	r        *Reconciler
	recorder *events.FakeRecorder
	progress *fixedProgress
	vd       *v1alpha2.VirtualDisk
}

var testConfig = Config{Pods: PodConfig{Image: "registry.example/d8v/importer:dev"}, Interval: 2 * time.Second,
	NewToken: func() (string, error) { return "t0ken", nil }}

func newWorld(t *testing.T, vd *v1alpha2.VirtualDisk, objs ...client.Object) *world {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	local := class("local", true, nil)
	objs = append(objs, vd, &local)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha2.VirtualDisk{}, &v1alpha2.ClusterVirtualImage{}, &corev1.PersistentVolumeClaim{}, &corev1.Pod{}).Build()
	w := &world{t: t, c: c, vd: vd, recorder: events.NewFakeRecorder(20), progress: &fixedProgress{p: importerprogress.Progress{Ratio: 0.5, SpeedBytes: 2048, AverageSpeedBytes: 1024}}}
	cfg := testConfig
	cfg.DVCRExporter = importerpod.DVCRExporter{Namespace: "d8-virtualization", Image: cfg.Pods.Image, PullerSecret: "dvcr-puller", TLSSecret: "dvcr-tls",
		Client: c, Reader: c, NewToken: func() (string, error) { return "exp0rt", nil }}
	w.r = NewReconciler(c, c, cfg, w.progress, clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), w.recorder)
	return w
}

func (w *world) reconcile() ctrl.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w.vd)})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

func (w *world) disk() *v1alpha2.VirtualDisk {
	w.t.Helper()
	d := &v1alpha2.VirtualDisk{}
	if err := w.c.Get(context.Background(), client.ObjectKeyFromObject(w.vd), d); err != nil {
		w.t.Fatal(err)
	}
	return d
}

// get reads obj by name in the disk's namespace; false when it is not there.
func (w *world) get(name string, obj client.Object) bool {
	w.t.Helper()
	err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.vd.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return true
}

func (w *world) claim() *corev1.PersistentVolumeClaim {
	w.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if !w.get(ClaimName(w.vd), pvc) {
		return nil
	}
	return pvc
}

func (w *world) pod() *corev1.Pod {
	w.t.Helper()
	pod := &corev1.Pod{}
	if !w.get(ImporterName(w.vd), pod) {
		return nil
	}
	return pod
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

func (w *world) phase(want v1alpha2.DiskPhase) *v1alpha2.VirtualDisk {
	w.t.Helper()
	d := w.disk()
	if d.Status.Phase != want {
		w.t.Fatalf("phase %s, want %s: %+v", d.Status.Phase, want, d.Status.Conditions)
	}
	return d
}

func (w *world) update(obj client.Object) {
	w.t.Helper()
	if err := w.c.Update(context.Background(), obj); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) updateStatus(obj client.Object) {
	w.t.Helper()
	if err := w.c.Status().Update(context.Background(), obj); err != nil {
		w.t.Fatal(err)
	}
}

// bind binds the claim as the provisioner would, at capacity.
func (w *world) bind(capacity string) {
	w.t.Helper()
	pvc := w.claim()
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	w.updateStatus(pvc)
}

// end terminates the importer container with result r.
func (w *world) end(r contract.Result) {
	w.t.Helper()
	pod := w.pod()
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: importerresult.Container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(contract.ExitCode(r.Reason)), Message: string(r.Marshal())}}}}
	w.updateStatus(pod)
}

func newDisk(ds *v1alpha2.VirtualDiskDataSource, size string) *v1alpha2.VirtualDisk {
	d := disk(ds, size, "")
	d.ResourceVersion = ""
	return d
}

func TestReconcileImportReady(t *testing.T) {
	w := newWorld(t, newDisk(httpSource, "100Mi"))
	w.reconcile()
	if !slices.Contains(w.disk().Finalizers, Finalizer) {
		t.Fatal("no finalizer")
	}
	w.reconcile()
	d := w.phase(v1alpha2.DiskProvisioning)
	w.event("Phase Provisioning")
	pvc, pod := w.claim(), w.pod()
	if pvc == nil || pod == nil {
		t.Fatalf("claim %v, pod %v", pvc, pod)
	}
	if d.Status.Target.PersistentVolumeClaimName != pvc.Name || d.Status.StorageClassName != "local" || d.Status.Progress != "0%" {
		t.Fatalf("status %+v", d.Status)
	}
	if !slices.Contains(pod.Spec.Containers[0].Args, "--source-url=http://srv/tiny.qcow2") {
		t.Fatalf("args %q", pod.Spec.Containers[0].Args)
	}

	pod.Status.PodIP = "10.213.0.9"
	pod.Status.Phase = corev1.PodRunning
	w.updateStatus(pod)
	if res := w.reconcile(); res.RequeueAfter != testConfig.Interval {
		t.Fatalf("result %+v", res)
	}
	if d := w.disk(); d.Status.Progress != "50.0%" || d.Status.DownloadSpeed == nil || d.Status.DownloadSpeed.Current != "2.0Ki/s" {
		t.Fatalf("progress %+v", d.Status)
	}
	// A failed read leaves the progress as it was.
	w.progress.err = errors.New("connection refused")
	w.reconcile()
	if d := w.disk(); d.Status.Progress != "50.0%" {
		t.Fatalf("progress %q", d.Status.Progress)
	}

	w.bind("139Mi")
	w.end(contract.Result{Reason: contract.ReasonCompleted, Format: "qcow2", UnpackedSize: 25 << 20})
	w.reconcile()
	d = w.phase(v1alpha2.DiskReady)
	w.event("Phase Ready")
	if d.Status.Capacity != "139Mi" || d.Status.Progress != "100%" || d.Status.DownloadSpeed != nil {
		t.Fatalf("status %+v", d.Status)
	}
	if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ReadyType)); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v", c)
	}
	if w.claim().Annotations[AnnotationProvisioned] != "true" {
		t.Fatal("the claim is not marked provisioned")
	}
	if w.pod() != nil {
		t.Fatal("the importer pod is left")
	}
	w.reconcile()
	w.phase(v1alpha2.DiskReady)
}

func TestReconcileImportFailed(t *testing.T) {
	cases := []struct {
		name   string
		result contract.Result
		want   string
	}{
		{"checksum", contract.Result{Reason: contract.ReasonChecksumMismatch, Message: "the sha256 checksum of the downloaded file is 0605..., but aaaa... was expected"}, "ChecksumMismatch: the sha256"},
		{"404", contract.Result{Reason: contract.ReasonSourceNotFound, Message: "HTTP 404 Not Found"}, "SourceNotFound"},
		{"not an image", contract.Result{Reason: contract.ReasonNotDiskImage, Message: "an HTML page"}, "NotDiskImage"},
		{"too large", contract.Result{Reason: contract.ReasonTooLarge, Message: "larger than 100Mi"}, "grow spec.persistentVolumeClaim.size"},
		{"an ISO", contract.Result{Reason: contract.ReasonCompleted, Format: "iso", CDROM: true}, "cannot be a disk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, newDisk(httpSource, "100Mi"))
			w.reconcile()
			w.reconcile()
			w.event("Phase Provisioning")
			w.end(tc.result)
			w.reconcile()
			d := w.phase(v1alpha2.DiskFailed)
			w.event("Warning Failed Phase Failed: ")
			c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ReadyType))
			if c == nil || c.Reason != string(vdcondition.ProvisioningFailed) || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("Ready %+v", c)
			}
			if w.pod() != nil || w.claim() != nil || d.Status.Target.PersistentVolumeClaimName != "" {
				t.Fatalf("left behind: pod %v, claim %v, target %q", w.pod(), w.claim(), d.Status.Target.PersistentVolumeClaimName)
			}
			w.reconcile()
			if w.claim() != nil {
				t.Fatal("a failed disk makes a claim again")
			}
			if tc.result.Reason != contract.ReasonTooLarge {
				return
			}
			// A larger size tries again.
			d.Spec.PersistentVolumeClaim.Size = ptr.To(resource.MustParse("200Mi"))
			d.Generation++
			w.update(d)
			w.reconcile()
			w.phase(v1alpha2.DiskProvisioning)
			if w.pod() == nil || w.claim() == nil {
				t.Fatal("no new import")
			}
		})
	}
}

// An upload: a token, then the claim, the uploader and its Service; Pending until the uploader
// is ready, then WaitForUserUpload with the URL; Provisioning once bytes come; Ready with the
// uploader, its Secret and its Service gone. An upload that never comes fails the disk.
func TestReconcileUpload(t *testing.T) {
	w := newWorld(t, newDisk(uploadSource, "1Gi"))
	w.reconcile() // finalizer
	w.reconcile() // token
	if got := w.disk().Annotations[importerpod.AnnotationUploadToken]; got != "t0ken" || w.claim() != nil {
		t.Fatalf("token %q, claim %v", got, w.claim())
	}
	w.reconcile()
	d := w.phase(v1alpha2.DiskPending)
	w.event("Phase Pending: the uploader is starting")
	pod, svc, secret := w.pod(), &corev1.Service{}, &corev1.Secret{}
	if pod == nil || w.claim() == nil || !w.get(UploaderName(w.vd), svc) || !w.get(ImporterName(w.vd), secret) || string(secret.Data[keyUploadToken]) != "t0ken" {
		t.Fatalf("pod %v, claim %v, service %v, secret %v", pod, w.claim(), svc, secret.Data)
	}
	if d.Status.ImageUploadURLs != nil || d.Status.Target.PersistentVolumeClaimName == "" {
		t.Fatalf("status %+v", d.Status)
	}

	// Running but not ready: still no URL. Ready: the URL, and how to upload.
	pod.Status.PodIP, pod.Status.Phase = "10.213.0.9", corev1.PodRunning
	w.updateStatus(pod)
	w.progress.p = importerprogress.Progress{}
	w.reconcile()
	w.phase(v1alpha2.DiskPending)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	w.updateStatus(pod)
	if res := w.reconcile(); res.RequeueAfter != testConfig.Interval {
		t.Fatalf("result %+v", res)
	}
	d = w.phase(v1alpha2.DiskWaitForUserUpload)
	w.event("Phase WaitForUserUpload: waiting for the upload: curl -T disk.qcow2")
	if d.Status.ImageUploadURLs == nil || d.Status.ImageUploadURLs.InCluster != "http://vd-upload-tiny.ns.svc/upload" {
		t.Fatalf("upload URLs %+v", d.Status.ImageUploadURLs)
	}
	if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ReadyType)); c == nil || c.Reason != string(vdcondition.WaitForUserUpload) {
		t.Fatalf("Ready %+v", c)
	}
	// A progress that cannot be read keeps the phase.
	w.progress.err = errors.New("connection refused")
	w.reconcile()
	w.phase(v1alpha2.DiskWaitForUserUpload)

	w.progress.p, w.progress.err = importerprogress.Progress{ReadBytes: 1 << 20, Ratio: 0.25}, nil
	w.reconcile()
	if d := w.phase(v1alpha2.DiskProvisioning); d.Status.ImageUploadURLs != nil || d.Status.Progress != "25.0%" {
		t.Fatalf("status %+v", d.Status)
	}
	w.event("Phase Provisioning")
	// Once bytes came, a progress that cannot be read does not bring the URL back.
	w.progress.err = errors.New("connection refused")
	w.reconcile()
	w.phase(v1alpha2.DiskProvisioning)

	w.bind("1120Mi")
	w.end(contract.Result{Reason: contract.ReasonCompleted, Format: "qcow2", UnpackedSize: 25 << 20})
	w.reconcile()
	w.phase(v1alpha2.DiskReady)
	if w.pod() != nil || w.get(UploaderName(w.vd), &corev1.Service{}) || w.get(ImporterName(w.vd), &corev1.Secret{}) {
		t.Fatal("the uploader, its Service or its Secret is left")
	}

	t.Run("never comes", func(t *testing.T) {
		w := newWorld(t, newDisk(uploadSource, "1Gi"))
		w.reconcile()
		w.reconcile()
		w.reconcile()
		w.end(contract.Result{Reason: contract.ReasonUploadTimeout, Message: "no upload began within 1h0m0s: delete the image and create it again"})
		w.reconcile()
		d := w.phase(v1alpha2.DiskFailed)
		if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ReadyType)); c == nil || c.Reason != string(vdcondition.WaitForUserUploadTimeout) ||
			!strings.HasPrefix(c.Message, "no upload began within 1h0m0s") {
			t.Fatalf("Ready %+v", c)
		}
		if w.pod() != nil || w.claim() != nil || w.get(UploaderName(w.vd), &corev1.Service{}) {
			t.Fatal("left behind")
		}
	})
}

// A disk from a URL without a size: the inspector learns the source's unpacked size, which
// becomes the disk's; then the import as usual. An ISO found by the inspector fails the disk.
// TestReconcileStagedUpload: an upload to a disk without a size goes to a stager (the upload's
// URLs point at it), whose staged size becomes the disk's; the claim's importer reads the
// stager's export with the upload's token; then the stager, the Service and the Secret go.
func TestReconcileStagedUpload(t *testing.T) {
	w := newWorld(t, newDisk(uploadSource, ""))
	w.reconcile() // finalizer
	w.reconcile() // token
	w.reconcile()
	w.phase(v1alpha2.DiskPending)
	w.event("Phase Pending: the uploader is starting")
	stager := &corev1.Pod{}
	if !w.get(InspectorName(w.vd), stager) || !IsStager(stager) || w.claim() != nil || w.pod() != nil || !w.get(UploaderName(w.vd), &corev1.Service{}) {
		t.Fatalf("stager %v, claim %v, importer %v", stager.Name, w.claim(), w.pod())
	}
	stager.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.213.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	w.updateStatus(stager)
	w.progress.p = importerprogress.Progress{}
	w.reconcile()
	if d := w.phase(v1alpha2.DiskWaitForUserUpload); d.Status.ImageUploadURLs == nil || d.Status.ImageUploadURLs.InCluster != "http://vd-upload-tiny.ns.svc/upload" {
		t.Fatalf("upload URLs %+v", d.Status.ImageUploadURLs)
	}
	w.progress.p = importerprogress.Progress{ReadBytes: 1 << 20, Ratio: 0.5}
	w.reconcile()
	w.phase(v1alpha2.DiskProvisioning)
	w.progress.p = importerprogress.Progress{ReadBytes: 2 << 20, Ratio: 1, Staged: &importerprogress.Staged{UnpackedBytes: 25 << 20, Format: "qcow2"}}
	w.reconcile()
	if got := w.disk().Annotations[AnnotationSourceSize]; got != "26214400" {
		t.Fatalf("size %q", got)
	}
	w.reconcile()
	pvc, pod := w.claim(), w.pod()
	if pvc == nil || pod == nil || pvc.Annotations[AnnotationDiskSize] != "25Mi" {
		t.Fatalf("claim %+v, importer %v", pvc, pod)
	}
	args := pod.Spec.Containers[0].Args
	if !slices.Contains(args, "--source-url=http://10.213.0.9:8091/export") || !slices.Contains(args, "--source-token-file=/etc/importer/source/export-token") ||
		!slices.Contains(args, "--capacity=26214400") || pod.Labels[labelUploader] != "" {
		t.Fatalf("importer %q %v", args, pod.Labels)
	}
	if !w.get(InspectorName(w.vd), &corev1.Pod{}) {
		t.Fatal("the stager goes before the claim holds the upload")
	}
	w.progress.p = importerprogress.Progress{ReadBytes: 1 << 20, Ratio: 0.5}
	w.reconcile()
	w.phase(v1alpha2.DiskProvisioning)
	w.bind("30Mi")
	w.end(contract.Result{Reason: contract.ReasonCompleted, Format: "raw", UnpackedSize: 25 << 20})
	for range 3 {
		w.reconcile()
	}
	w.phase(v1alpha2.DiskReady)
	if w.pod() != nil || w.get(InspectorName(w.vd), &corev1.Pod{}) || w.get(UploaderName(w.vd), &corev1.Service{}) || w.get(ImporterName(w.vd), &corev1.Secret{}) {
		t.Fatal("the importer, the stager, the Service or the Secret is left")
	}

	t.Run("an ISO", func(t *testing.T) {
		w := newWorld(t, newDisk(uploadSource, ""))
		for range 3 {
			w.reconcile()
		}
		stager := &corev1.Pod{}
		w.get(InspectorName(w.vd), stager)
		stager.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.213.0.9"}
		w.updateStatus(stager)
		w.progress.p = importerprogress.Progress{Ratio: 1, Staged: &importerprogress.Staged{UnpackedBytes: 1 << 20, Format: "iso", CDROM: true}}
		w.reconcile()
		w.phase(v1alpha2.DiskFailed)
		if w.get(InspectorName(w.vd), &corev1.Pod{}) || w.claim() != nil {
			t.Fatal("the stager or a claim is left")
		}
	})
	t.Run("the stager is gone before the claim's import", func(t *testing.T) {
		d := newDisk(uploadSource, "")
		d.Annotations = map[string]string{importerpod.AnnotationUploadToken: "t0ken", AnnotationSourceSize: "26214400"}
		w := newWorld(t, d)
		w.reconcile() // finalizer
		w.reconcile()
		d = w.phase(v1alpha2.DiskFailed)
		if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ReadyType)); c == nil || !strings.Contains(c.Message, "the staged upload is gone") {
			t.Fatalf("Ready %+v", c)
		}
	})
}

func TestReconcileInspect(t *testing.T) {
	w := newWorld(t, newDisk(httpSource, ""))
	w.reconcile() // finalizer
	w.reconcile()
	w.phase(v1alpha2.DiskProvisioning)
	w.event("Phase Provisioning: reading the source to learn its unpacked size")
	inspector := &corev1.Pod{}
	if !w.get(InspectorName(w.vd), inspector) || w.claim() != nil || w.pod() != nil {
		t.Fatalf("inspector %v, claim %v, importer %v", inspector.Name, w.claim(), w.pod())
	}
	if !slices.Contains(inspector.Spec.Containers[0].Args, "--inspect=true") || !slices.Contains(inspector.Spec.Containers[0].Args, "--source-url=http://srv/tiny.qcow2") {
		t.Fatalf("inspector args %q", inspector.Spec.Containers[0].Args)
	}
	w.reconcile() // watches it
	w.phase(v1alpha2.DiskProvisioning)

	inspector.Status.Phase = corev1.PodSucceeded
	inspector.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: importerresult.Container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Message: string(contract.Result{Reason: contract.ReasonCompleted, Format: "qcow2", UnpackedSize: 25 << 20}.Marshal())}}}}
	w.updateStatus(inspector)
	w.reconcile()
	if got := w.disk().Annotations[AnnotationSourceSize]; got != "26214400" || w.get(InspectorName(w.vd), &corev1.Pod{}) {
		t.Fatalf("size %q, inspector left: %v", got, w.get(InspectorName(w.vd), &corev1.Pod{}))
	}
	w.reconcile()
	pvc, pod := w.claim(), w.pod()
	if pvc == nil || pod == nil || pvc.Annotations[AnnotationDiskSize] != "25Mi" || !slices.Contains(pod.Spec.Containers[0].Args, "--capacity=26214400") {
		t.Fatalf("claim %+v, importer %v", pvc, pod)
	}

	t.Run("an ISO", func(t *testing.T) {
		w := newWorld(t, newDisk(httpSource, ""))
		w.reconcile()
		w.reconcile()
		inspector := &corev1.Pod{}
		w.get(InspectorName(w.vd), inspector)
		inspector.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: importerresult.Container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Message: string(contract.Result{Reason: contract.ReasonCompleted, Format: "iso", CDROM: true, UnpackedSize: 1 << 20}.Marshal())}}}}
		w.updateStatus(inspector)
		w.reconcile()
		d := w.phase(v1alpha2.DiskFailed)
		if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ReadyType)); c == nil || !strings.Contains(c.Message, "cannot be a disk") {
			t.Fatalf("Ready %+v", c)
		}
		if w.get(InspectorName(w.vd), &corev1.Pod{}) || w.claim() != nil {
			t.Fatal("left behind")
		}
	})
}

func TestReconcileBlank(t *testing.T) {
	w := newWorld(t, newDisk(nil, "1Gi"))
	w.reconcile()
	w.reconcile()
	w.phase(v1alpha2.DiskWaitForFirstConsumer)
	w.event("Phase WaitForFirstConsumer: StorageClass local binds the volume")
	if pvc := w.claim(); pvc == nil || pvc.Annotations[AnnotationProvisioned] != "true" || w.pod() != nil {
		t.Fatalf("claim %v, pod %v", pvc, w.pod())
	}
	w.reconcile()
	w.phase(v1alpha2.DiskWaitForFirstConsumer)
	w.bind("1121Mi")
	w.reconcile()
	if d := w.phase(v1alpha2.DiskReady); d.Status.Capacity != "1121Mi" {
		t.Fatalf("capacity %q", d.Status.Capacity)
	}
}

func TestReconcileResize(t *testing.T) {
	w := newWorld(t, newDisk(nil, "100Mi"))
	w.reconcile()
	w.reconcile()
	w.bind("100Mi")
	w.reconcile()
	w.phase(v1alpha2.DiskReady)

	d := w.disk()
	d.Spec.PersistentVolumeClaim.Size = ptr.To(resource.MustParse("200Mi"))
	d.Generation++
	w.update(d)
	w.reconcile()
	if got := w.claim().Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "200Mi" {
		t.Fatalf("request %s", got.String())
	}
	d = w.phase(v1alpha2.DiskResizing)
	if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.ResizingType)); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Resizing %+v", c)
	}
	w.bind("200Mi")
	w.reconcile()
	if d := w.phase(v1alpha2.DiskReady); d.Status.Capacity != "200Mi" || d.Status.ObservedGeneration != d.Generation {
		t.Fatalf("status %+v", d.Status)
	}
}

func TestReconcileDeleteInUse(t *testing.T) {
	w := newWorld(t, newDisk(nil, "100Mi"))
	w.reconcile()
	w.reconcile()
	w.bind("139Mi")
	w.reconcile()
	launcher := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.vd.Namespace, Name: "virt-launcher-vm-abcde"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(w.vd)}}}}},
	}
	if err := w.c.Create(context.Background(), launcher); err != nil {
		t.Fatal(err)
	}
	launcher.Status.Phase = corev1.PodRunning
	w.updateStatus(launcher)
	if err := w.c.Delete(context.Background(), w.disk()); err != nil {
		t.Fatal(err)
	}
	if res := w.reconcile(); res.RequeueAfter == 0 {
		t.Fatal("a disk in use is not looked at again")
	}
	d := w.phase(v1alpha2.DiskTerminating)
	if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.InUseType)); c == nil || !strings.Contains(c.Message, "Pod virt-launcher-vm-abcde") {
		t.Fatalf("InUse %+v", c)
	}
	if w.claim() == nil {
		t.Fatal("the claim of a disk in use is deleted")
	}
	if err := w.c.Delete(context.Background(), launcher); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if w.claim() != nil {
		t.Fatal("the claim is left")
	}
	if err := w.c.Get(context.Background(), client.ObjectKeyFromObject(w.vd), &v1alpha2.VirtualDisk{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the disk stays: %v", err)
	}
}

// A disk from a ClusterVirtualImage waits for the image, then reads it from DVCR through an
// exporter in the module's namespace (which mounts DVCR's Secrets there): the importer, in the
// disk's namespace, holds only the export's token. The exporter goes with the importer.
func TestReconcileFromClusterVirtualImage(t *testing.T) {
	cvi := &v1alpha2.ClusterVirtualImage{ObjectMeta: metav1.ObjectMeta{Name: "tiny"}}
	w := newWorld(t, newDisk(cviSource, ""))
	w.reconcile()
	w.reconcile()
	d := w.phase(v1alpha2.DiskPending)
	if c := meta.FindStatusCondition(d.Status.Conditions, string(vdcondition.DatasourceReadyType)); c == nil || c.Reason != string(vdcondition.ClusterImageNotFound) {
		t.Fatalf("DatasourceReady %+v", c)
	}
	w.event("Phase Pending: spec.dataSource.objectRef: ClusterVirtualImage tiny not found")

	if err := w.c.Create(context.Background(), cvi); err != nil {
		t.Fatal(err)
	}
	cvi.Status.Phase = v1alpha2.ImageReady
	cvi.Status.Size.UnpackedBytes = "26214400"
	cvi.Status.Target.RegistryURL = "dvcr.d8-virtualization.svc/cvi/tiny:latest"
	if err := w.c.Status().Update(context.Background(), cvi); err != nil {
		t.Fatal(err)
	}
	exporter := types.NamespacedName{Namespace: "d8-virtualization", Name: ExporterName(w.vd)}
	for range 3 { // the claim and the exporter's Secret, its Pod, then it starts
		if res := w.reconcile(); res.RequeueAfter == 0 && w.pod() == nil {
			t.Fatalf("waiting for the exporter: %+v", res)
		}
	}
	if got := w.claim().Annotations[AnnotationDiskSize]; got != "25Mi" {
		t.Fatalf("disk size %s", got)
	}
	pod := &corev1.Pod{}
	if err := w.c.Get(context.Background(), exporter, pod); err != nil {
		t.Fatal(err)
	}
	if args := pod.Spec.Containers[0].Args; !slices.Contains(args, "--export-image=dvcr.d8-virtualization.svc/cvi/tiny:latest") || !slices.Contains(args, "--source-auth-file=/etc/dvcr/pull/.dockerconfigjson") {
		t.Fatalf("exporter args %q", args)
	}
	if v := pod.Spec.Volumes; len(v) != 3 || v[1].Secret.SecretName != "dvcr-puller" || v[2].Secret.SecretName != "dvcr-tls" {
		t.Fatalf("exporter volumes %+v", v)
	}
	if w.pod() != nil {
		t.Fatal("the importer starts before its exporter is ready")
	}
	w.phase(v1alpha2.DiskProvisioning)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := w.c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	w.phase(v1alpha2.DiskProvisioning)
	secret := &corev1.Secret{}
	if !w.get(ImporterName(w.vd), secret) || string(secret.Data["export-token"]) != "exp0rt" || len(secret.Data) != 1 {
		t.Fatalf("importer secret %+v: only the export's token", secret.Data)
	}
	if args := w.pod().Spec.Containers[0].Args; !slices.Contains(args, "--source-url=http://10.0.0.9:8090/export") || !slices.Contains(args, "--source-token-file=/etc/importer/source/export-token") || !slices.Contains(args, "--capacity=26214400") {
		t.Fatalf("args %q", args)
	}
	w.bind("59Mi")
	w.end(contract.Result{Reason: contract.ReasonCompleted, Format: "qcow2"})
	w.reconcile()
	w.phase(v1alpha2.DiskReady)
	if w.get(ImporterName(w.vd), &corev1.Secret{}) {
		t.Fatal("the importer secret is left")
	}
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Secret{}} {
		if err := w.c.Get(context.Background(), exporter, o); !apierrors.IsNotFound(err) {
			t.Fatalf("the exporter's %T is left: %v", o, err)
		}
	}
}

func TestReconcileLost(t *testing.T) {
	w := newWorld(t, newDisk(nil, "100Mi"))
	w.reconcile()
	w.reconcile()
	w.bind("139Mi")
	w.reconcile()
	w.phase(v1alpha2.DiskReady)
	if err := w.c.Delete(context.Background(), w.claim()); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	w.phase(v1alpha2.DiskLost)
	for len(w.recorder.Events) > 1 {
		<-w.recorder.Events
	}
	w.event("Warning PVCLost")
}
