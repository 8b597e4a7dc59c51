package vmbda

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/fakeclient"
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
		WithStatusSubresource(&v1alpha2.VirtualMachineBlockDeviceAttachment{}).Build()
	core := &fakeCore{c: c}
	rec := events.NewFakeRecorder(50)
	return &world{t: t, c: c, core: core, r: NewReconciler(c, core, clocktesting.NewFakeClock(now.Time), rec), recorder: rec}
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
