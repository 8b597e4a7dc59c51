package vmbda

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/fakeclient"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// fakeCore plays virtualization-api and the core: addvolume and removevolume change the VMI's
// spec, as the core's VMI calls do.
type fakeCore struct {
	c             client.Client
	adds, removes []string
	err           error
}

func (f *fakeCore) vmi(ctx context.Context, ns, name string, change func(*kubevirtv1.VirtualMachineInstance)) error {
	if f.err != nil {
		return f.err
	}
	v := &kubevirtv1.VirtualMachineInstance{}
	if err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, v); err != nil {
		return err
	}
	change(v)
	return f.c.Update(ctx, v)
}

func (f *fakeCore) AddVolume(ctx context.Context, ns, name string, opts *kubevirtv1.AddVolumeOptions) error {
	f.adds = append(f.adds, opts.Name)
	return f.vmi(ctx, ns, name, func(v *kubevirtv1.VirtualMachineInstance) {
		v.Spec.Volumes = append(v.Spec.Volumes, kubevirtv1.Volume{Name: opts.Name,
			VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: opts.VolumeSource.PersistentVolumeClaim}})
	})
}

func (f *fakeCore) RemoveVolume(ctx context.Context, ns, name string, opts *kubevirtv1.RemoveVolumeOptions) error {
	f.removes = append(f.removes, opts.Name)
	return f.vmi(ctx, ns, name, func(v *kubevirtv1.VirtualMachineInstance) { v.Spec.Volumes = nil })
}

type world struct {
	t        *testing.T
	c        client.Client
	core     *fakeCore
	r        *Reconciler
	recorder *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	c := fakeclient.Builder(t, objs...).
		WithStatusSubresource(&v1alpha2.VirtualMachineBlockDeviceAttachment{}, &v1alpha2.ClusterVirtualImage{}, &corev1.Pod{}).Build()
	core := &fakeCore{c: c}
	rec := events.NewFakeRecorder(50)
	copier := Copier{Client: c, Image: "importer:1", Progress: halfway{}, Exporter: importerpod.DVCRExporter{Namespace: "d8-virtualization", Image: "importer:1",
		PullerSecret: "dvcr-puller", TLSSecret: "dvcr-tls", Client: c, Reader: c, NewToken: func() (string, error) { return "exp0rt", nil }}}
	return &world{t: t, c: c, core: core, r: NewReconciler(c, core, copier, clocktesting.NewFakeClock(now.Time), rec), recorder: rec}
}

// settle reconciles the attachment until a reconcile changes nothing; nil once it is gone.
func (w *world) settle(name string) *v1alpha2.VirtualMachineBlockDeviceAttachment {
	w.t.Helper()
	ctx := context.Background()
	last := ""
	for range 10 {
		if _, err := w.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
			w.t.Fatalf("reconcile %s: %v", name, err)
		}
		a := &v1alpha2.VirtualMachineBlockDeviceAttachment{}
		if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, a); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			w.t.Fatal(err)
		}
		if a.ResourceVersion == last {
			return a
		}
		last = a.ResourceVersion
	}
	w.t.Fatalf("%s does not settle", name)
	return nil
}

func (w *world) setVolumeStatus(phase kubevirtv1.VolumePhase) {
	w.t.Helper()
	ctx := context.Background()
	v := &kubevirtv1.VirtualMachineInstance{}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "vm"}, v); err != nil {
		w.t.Fatal(err)
	}
	v.Status.VolumeStatus = nil
	if phase != "" {
		v.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "vd-data", Phase: phase, Target: "sda",
			HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}}}
	}
	if err := w.c.Update(ctx, v); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) events() string {
	var out []string
	for len(w.recorder.Events) > 0 {
		out = append(out, <-w.recorder.Events)
	}
	return strings.Join(out, "\n")
}

// TestReconcileAttachesAndDetaches: addvolume once, Attached when the VMI says Ready,
// removevolume on delete, and the finalizer goes once the guest has let go.
func TestReconcileAttachesAndDetaches(t *testing.T) {
	a := attachment("a", "data", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.Finalizers = nil })
	w := newWorld(t, a, runningVM(), vmi("data", "", ""), readyDisk("data"))
	got := w.settle("a")
	if got.Status.Phase != v1alpha2.BlockDeviceAttachmentPhaseInProgress || len(w.core.adds) != 1 || w.core.adds[0] != "vd-data" {
		t.Fatalf("after the first round: phase %q, addvolume %v", got.Status.Phase, w.core.adds)
	}
	w.setVolumeStatus(kubevirtv1.VolumeReady)
	if got = w.settle("a"); got.Status.Phase != v1alpha2.BlockDeviceAttachmentPhaseAttached || len(w.core.adds) != 1 {
		t.Fatalf("with the volume Ready: phase %q, addvolume %v", got.Status.Phase, w.core.adds)
	}
	if ev := w.events(); !strings.Contains(ev, "Normal AttachmentRequestSent") || !strings.Contains(ev, "Normal Attached Phase Attached: VirtualDisk data is plugged into VirtualMachine vm as sda") {
		t.Errorf("events:\n%s", ev)
	}
	if err := w.c.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	w.setVolumeStatus(kubevirtv1.HotplugVolumeDetaching)
	if got = w.settle("a"); got == nil || got.Status.Phase != v1alpha2.BlockDeviceAttachmentPhaseTerminating || len(w.core.removes) != 1 {
		t.Fatalf("deleted while the guest has the disk: %+v, removevolume %v", got, w.core.removes)
	}
	w.setVolumeStatus("")
	if got = w.settle("a"); got != nil {
		t.Fatalf("unplugged, the attachment stays: %+v", got.Status)
	}
}

// TestReconcileReportsAFailedCall: a refused addvolume is a Warning event and an error (retried).
func TestReconcileReportsAFailedCall(t *testing.T) {
	w := newWorld(t, attachment("a", "data"), runningVM(), vmi("data", "", ""), readyDisk("data"))
	w.core.err = apierrors.NewConflict(v1alpha2.Resource("virtualmachines"), "vm", nil)
	_, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}})
	if err == nil || !apierrors.IsConflict(err) {
		t.Fatalf("Reconcile = %v, want the conflict", err)
	}
	if ev := w.events(); !strings.Contains(ev, "Warning FailedAttach Error plugging VirtualDisk data into VirtualMachine vm") {
		t.Errorf("events:\n%s", ev)
	}
}

// TestReconcileConflict: a disk in a VM's spec fails the attachment with reason Conflict.
func TestReconcileConflict(t *testing.T) {
	owner := runningVM()
	owner.Name = "owner"
	owner.Spec.BlockDeviceRefs = []v1alpha2.BlockDeviceSpecRef{{Kind: "VirtualDisk", Name: "data"}}
	w := newWorld(t, attachment("a", "data"), runningVM(), owner, vmi("data", "", ""), readyDisk("data"))
	got := w.settle("a")
	if got.Status.Phase != v1alpha2.BlockDeviceAttachmentPhaseFailed || len(w.core.adds) != 0 {
		t.Fatalf("phase %q, addvolume %v", got.Status.Phase, w.core.adds)
	}
	if ev := w.events(); !strings.Contains(ev, "Warning Conflict Phase Failed: VirtualDisk data is already attached to VirtualMachine owner") {
		t.Errorf("events:\n%s", ev)
	}
}

// halfway is a filler's progress: half of it, at 1 MiB/s.
type halfway struct{}

func (halfway) Scrape(context.Context, string) (importerprogress.Progress, error) {
	return importerprogress.Progress{Ratio: 0.5, SpeedBytes: 1 << 20}, nil
}

// defaultClass is the cluster's default StorageClass.
var defaultClass = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local",
	Annotations: map[string]string{storageclass.AnnotationDefault: "true"}}, Provisioner: "local"}

func (w *world) reconcile(name string) ctrl.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	if err != nil {
		w.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

// object reads key into obj; false when it is not there.
func (w *world) object(ns, name string, obj client.Object) bool {
	w.t.Helper()
	err := w.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatal(err)
	}
	return err == nil
}

func (w *world) setPodStatus(ns, name string, st corev1.PodStatus) {
	w.t.Helper()
	pod := &corev1.Pod{}
	if !w.object(ns, name, pod) {
		w.t.Fatalf("no pod %s/%s", ns, name)
	}
	pod.Status = st
	if err := w.c.Status().Update(context.Background(), pod); err != nil {
		w.t.Fatal(err)
	}
}

func ended(r contract.Result) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: importerresult.Container,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(contract.ExitCode(r.Reason)), Message: string(r.Marshal())}}}}}
}

// TestReconcileCopiesAClusterImage: an ISO in DVCR is copied onto a claim of the attachment's
// (default class, the image's size) by a filler on the VM's node that reads a DVCR exporter in
// the module's namespace with its token only; then plugged in as a read-only CD-ROM; the filler
// and the exporter go, the claim records the copy.
func TestReconcileCopiesAClusterImage(t *testing.T) {
	a := clusterImageAttachment()
	w := newWorld(t, a, runningVM(), vmiOn("node1"), clusterImage(), defaultClass)
	w.reconcile("a")
	claim := &corev1.PersistentVolumeClaim{}
	want := storageclass.ClaimRequest(1 << 20)
	if !w.object("ns", CopyClaimName(a), claim) || *claim.Spec.StorageClassName != "local" || claim.OwnerReferences[0].UID != a.UID ||
		!claim.Spec.Resources.Requests.Storage().Equal(want) {
		t.Fatalf("copy claim %+v", claim)
	}
	exporter := ExporterName(a)
	for range 3 { // the exporter's Secret and Pod, then it starts
		if res := w.reconcile("a"); res.RequeueAfter == 0 {
			t.Fatalf("no look again while the exporter starts: %+v", res)
		}
	}
	pod := &corev1.Pod{}
	if !w.object("d8-virtualization", exporter, pod) || !slices.Contains(pod.Spec.Containers[0].Args, "--export-image=dvcr/cvi/img:latest") {
		t.Fatalf("exporter %+v", pod.Spec.Containers)
	}
	if w.object("ns", FillerName(a), &corev1.Pod{}) {
		t.Fatal("the filler starts before its exporter serves")
	}
	got := &v1alpha2.VirtualMachineBlockDeviceAttachment{}
	w.object("ns", "a", got)
	if got.Status.Phase != v1alpha2.BlockDeviceAttachmentPhaseInProgress {
		t.Fatalf("phase while copying %q", got.Status.Phase)
	}
	w.setPodStatus("d8-virtualization", exporter, corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}})
	w.reconcile("a")
	filler, secret := &corev1.Pod{}, &corev1.Secret{}
	if !w.object("ns", FillerName(a), filler) || !w.object("ns", FillerName(a), secret) {
		t.Fatal("no filler")
	}
	if string(secret.Data[importerpod.KeyExportToken]) != "exp0rt" || len(secret.Data) != 1 {
		t.Fatalf("filler secret %+v: only the export's token", secret.Data)
	}
	args := filler.Spec.Containers[0].Args
	if !slices.Contains(args, "--source-url=http://10.0.0.9:8090/export") || !slices.Contains(args, "--capacity=1048576") ||
		filler.Spec.Volumes[2].PersistentVolumeClaim.ClaimName != CopyClaimName(a) ||
		filler.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node1" {
		t.Fatalf("filler %+v", filler.Spec)
	}
	if len(w.core.adds) != 0 {
		t.Fatalf("plugged in before the copy: %v", w.core.adds)
	}
	// While the filler runs, its progress is in the Attached condition.
	w.setPodStatus("ns", FillerName(a), corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"})
	if res := w.reconcile("a"); res.RequeueAfter == 0 {
		t.Fatalf("no look again while the copy runs: %+v", res)
	}
	w.object("ns", "a", got)
	if c := meta.FindStatusCondition(got.Status.Conditions, "Attached"); c == nil || !strings.Contains(c.Message, "on node node1 (50.0% at 1.0Mi/s), then it is plugged in") {
		t.Fatalf("Attached while copying %+v", c)
	}
	w.setPodStatus("ns", FillerName(a), ended(contract.Result{Reason: contract.ReasonCompleted}))
	w.settle("a")
	if len(w.core.adds) != 1 || w.core.adds[0] != "cvi-img" {
		t.Fatalf("addvolume %v", w.core.adds)
	}
	if w.object("ns", FillerName(a), &corev1.Pod{}) || w.object("ns", FillerName(a), &corev1.Secret{}) ||
		w.object("d8-virtualization", exporter, &corev1.Pod{}) || w.object("d8-virtualization", exporter, &corev1.Secret{}) {
		t.Fatal("the filler or the exporter is left")
	}
	w.object("ns", CopyClaimName(a), claim)
	if st := CopyStateOf(claim); !st.Filled {
		t.Fatalf("claim annotations %v", claim.Annotations)
	}
}

// TestReconcileCopyFails: a filler that fails fails the attachment with its reason, nothing is
// plugged in, and the copy is not tried again.
func TestReconcileCopyFails(t *testing.T) {
	a := clusterImageAttachment()
	w := newWorld(t, a, runningVM(), vmiOn("node1"), clusterImage(), defaultClass)
	for range 4 {
		w.reconcile("a")
	}
	w.setPodStatus("d8-virtualization", ExporterName(a), corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}})
	w.reconcile("a")
	w.setPodStatus("ns", FillerName(a), ended(contract.Result{Reason: contract.ReasonDestinationFailed, Message: "no room"}))
	got := w.settle("a")
	if got.Status.Phase != v1alpha2.BlockDeviceAttachmentPhaseFailed || len(w.core.adds) != 0 || w.object("ns", FillerName(a), &corev1.Pod{}) {
		t.Fatalf("phase %q, addvolume %v", got.Status.Phase, w.core.adds)
	}
	if ev := w.events(); !strings.Contains(ev, "Warning NotAttached Phase Failed: the copy of ClusterVirtualImage img for the hot-plug failed: DestinationFailed: no room") {
		t.Errorf("events:\n%s", ev)
	}
}

// TestReconcileCopyOnAnotherNode: a copy whose volume was bound on another node than the VM's
// now (the VM restarted elsewhere) is deleted and made again there.
func TestReconcileCopyOnAnotherNode(t *testing.T) {
	a := clusterImageAttachment()
	old := CopyClaim(a, storageclass.Choice{Name: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce}, 1<<20)
	old.Annotations = map[string]string{AnnotationCopied: "true", AnnotationSelectedNode: "node1"}
	old.Finalizers = []string{"kubernetes.io/pvc-protection"}
	w := newWorld(t, a, runningVM(), vmiOn("node2"), clusterImage(), defaultClass, old)
	if res := w.reconcile("a"); res.RequeueAfter == 0 {
		t.Fatalf("no look again while the old copy goes: %+v", res)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if !w.object("ns", CopyClaimName(a), claim) || claim.DeletionTimestamp == nil || len(w.core.adds) != 0 {
		t.Fatalf("the copy on node1: %+v, addvolume %v", claim.ObjectMeta, w.core.adds)
	}
	w.reconcile("a") // it is still going
	claim.Finalizers = nil
	if err := w.c.Update(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	w.reconcile("a")
	if !w.object("ns", CopyClaimName(a), claim) || claim.DeletionTimestamp != nil || CopyStateOf(claim).Filled {
		t.Fatalf("a new copy claim %+v", claim.ObjectMeta)
	}
}

// TestReconcileCleansUpAfterTheCopy: a copy recorded on its claim whose filler and exporter were
// left (their cleanup failed) has them deleted before the claim is plugged in.
func TestReconcileCleansUpAfterTheCopy(t *testing.T) {
	a := clusterImageAttachment()
	claim := CopyClaim(a, storageclass.Choice{Name: "local", VolumeMode: corev1.PersistentVolumeFilesystem, AccessMode: corev1.ReadWriteOnce}, 1<<20)
	claim.Annotations = map[string]string{AnnotationCopied: "true"}
	filler := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: FillerName(a), Labels: copyLabels(a, "filler")}}
	exporter := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "d8-virtualization", Name: ExporterName(a)}}
	w := newWorld(t, a, runningVM(), vmiOn("node1"), clusterImage(), claim, filler, exporter)
	w.reconcile("a")
	if w.object("ns", FillerName(a), &corev1.Pod{}) || w.object("d8-virtualization", ExporterName(a), &corev1.Pod{}) {
		t.Fatal("the filler or the exporter is left")
	}
	if len(w.core.adds) != 1 {
		t.Fatalf("addvolume %v", w.core.adds)
	}
}
