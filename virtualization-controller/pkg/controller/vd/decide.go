package vd

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

// Finalizer is kept on every VirtualDisk until no virtual machine uses it and its claim and
// importer are gone.
const Finalizer = "virtualization.deckhouse.io/vd-protection"

// AnnotationProvisioned on a disk's claim says it holds the disk: the import completed, or it
// is a blank disk's. A claim without it is never presented as Ready.
const AnnotationProvisioned = "virtualization.deckhouse.io/vd-provisioned"

// Step is the one thing a reconcile does next.
type Step int

const (
	// StepNone: the disk is where it should be.
	StepNone Step = iota
	// StepAddFinalizer: a new disk gets the Finalizer before anything is created for it.
	StepAddFinalizer
	// StepWaitUnused: the disk is being deleted but a virtual machine still uses it.
	StepWaitUnused
	// StepCleanup: the disk is being deleted and unused: its importer and claim go, then the Finalizer.
	StepCleanup
	// StepProvision: no claim yet: plan the disk, then create its claim (or record why not).
	StepProvision
	// StepDeleteImporter: the importer Pod (and its Secret) is done with, or an older disk's.
	StepDeleteImporter
	// StepDeleteClaim: the import failed; its half-written claim goes.
	StepDeleteClaim
	// StepCreatePod: the claim waits to be filled: start the importer.
	StepCreatePod
	// StepWatchProgress: the import runs; read its progress.
	StepWatchProgress
	// StepRecordResult: the importer ended; record its result.
	StepRecordResult
	// StepLost: the claim of a provisioned disk is gone.
	StepLost
	// StepObserve: the claim holds the disk: grow it if the spec asks, report it.
	StepObserve
	// StepWatchInspection: the inspector learns the source's size (a stager takes the upload);
	// read its progress.
	StepWatchInspection
	// StepRecordSize: the inspector ended; record the size it found, or the failure.
	StepRecordSize
	// StepDeleteInspector: the inspector is done with.
	StepDeleteInspector
)

func (s Step) String() string {
	return [...]string{"None", "AddFinalizer", "WaitUnused", "Cleanup", "Provision", "DeleteImporter", "DeleteClaim", "CreatePod", "WatchProgress", "RecordResult", "Lost", "Observe",
		"WatchInspection", "RecordSize", "DeleteInspector"}[s]
}

// State is what Decide looks at: the disk, its claim, its importer Pod and its inspector Pod
// (nil when absent), and, for a disk being deleted, whether something still uses it.
type State struct {
	VD        *v1alpha2.VirtualDisk
	PVC       *corev1.PersistentVolumeClaim
	Pod       *corev1.Pod
	Inspector *corev1.Pod
	InUse     bool
}

// Decide is the next step for a disk. It is pure.
func Decide(s State) Step {
	vd, pvc, pod, inspector := s.VD, s.PVC, s.Pod, s.Inspector
	_, sized := vd.Annotations[AnnotationSourceSize]
	hasFinalizer := false
	for _, f := range vd.Finalizers {
		hasFinalizer = hasFinalizer || f == Finalizer
	}
	switch {
	case vd.DeletionTimestamp != nil && hasFinalizer && s.InUse:
		return StepWaitUnused
	case vd.DeletionTimestamp != nil && hasFinalizer:
		return StepCleanup
	case vd.DeletionTimestamp != nil:
		return StepNone
	case !hasFinalizer:
		return StepAddFinalizer
	case pod != nil && !ownedBy(pod.OwnerReferences, vd):
		return StepDeleteImporter
	case inspector != nil && !ownedBy(inspector.OwnerReferences, vd):
		return StepDeleteInspector
	case pvc == nil && provisionedOnce(vd):
		return StepLost
	case pvc == nil && failedNow(vd):
		if pod != nil {
			return StepDeleteImporter
		}
		if inspector != nil {
			return StepDeleteInspector
		}
		return StepNone
	case pvc == nil && inspector != nil && sized && IsStager(inspector) && !importerresult.Done(inspector):
		// The upload is staged: the claim is made of its size and filled from the stager.
		return StepProvision
	case pvc == nil && inspector != nil && sized:
		return StepDeleteInspector
	case pvc == nil && inspector != nil && importerresult.Done(inspector):
		return StepRecordSize
	case pvc == nil && inspector != nil:
		return StepWatchInspection
	case pvc == nil:
		return StepProvision
	case inspector != nil && (!IsStager(inspector) || pvc.Annotations[AnnotationProvisioned] == "true" || failedNow(vd)):
		// A stager serves the upload until the claim holds it.
		return StepDeleteInspector
	case pvc.DeletionTimestamp != nil:
		return StepNone // the claim of a failed import is going; the disk is Failed already
	case pvc.Annotations[AnnotationProvisioned] == "true":
		if pod != nil {
			return StepDeleteImporter
		}
		return StepObserve
	case failedNow(vd):
		return StepDeleteClaim
	case pod == nil:
		return StepCreatePod
	case importerresult.Done(pod):
		return StepRecordResult
	default:
		return StepWatchProgress
	}
}

// IsStager: the inspector Pod is an Upload source's stager (StagerPod), which takes the
// upload, learns its size and serves it to the importer of the claim made of that size.
func IsStager(inspector *corev1.Pod) bool { return inspector.Labels[labelName] == stagerName }

// provisionedOnce: the disk had its claim filled (Ready, Resizing, or already PVCLost).
func provisionedOnce(vd *v1alpha2.VirtualDisk) bool {
	switch vd.Status.Phase {
	case v1alpha2.DiskReady, v1alpha2.DiskResizing, v1alpha2.DiskLost:
		return vd.Status.Target.PersistentVolumeClaimName != ""
	}
	return false
}

// failedNow: the current spec has failed; a changed spec (a larger size) tries again.
func failedNow(vd *v1alpha2.VirtualDisk) bool {
	return vd.Status.Phase == v1alpha2.DiskFailed && vd.Status.ObservedGeneration == vd.Generation
}

func ownedBy(refs []metav1.OwnerReference, vd *v1alpha2.VirtualDisk) bool {
	for _, o := range refs {
		if o.UID == vd.UID {
			return true
		}
	}
	return false
}

// Consumers are the Pods other than the disk's importer that use its claim and have not ended
// (a virtual machine's launcher Pod among them), by name, the virtual machines the disk's
// status lists, and the VirtualMachineBlockDeviceAttachments that plug it in (InProgress,
// Attached, or Terminating while the guest releases it). It is pure.
func Consumers(vd *v1alpha2.VirtualDisk, claim string, pods []corev1.Pod, attachments []v1alpha2.VirtualMachineBlockDeviceAttachment) []string {
	var users []string
	for _, vm := range vd.Status.AttachedToVirtualMachines {
		users = append(users, "VirtualMachine "+vm.Name)
	}
	for _, a := range attachments {
		ref := a.Spec.BlockDeviceRef
		switch a.Status.Phase {
		case v1alpha2.BlockDeviceAttachmentPhaseInProgress, v1alpha2.BlockDeviceAttachmentPhaseAttached, v1alpha2.BlockDeviceAttachmentPhaseTerminating:
			if ref.Kind == v1alpha2.VMBDAObjectRefKindVirtualDisk && ref.Name == vd.Name {
				users = append(users, "VirtualMachineBlockDeviceAttachment "+a.Name)
			}
		}
	}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || ownedBy(p.OwnerReferences, vd) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				users = append(users, "Pod "+p.Name)
				break
			}
		}
	}
	return users
}
