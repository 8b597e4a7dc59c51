package vd

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// The status builders below are pure: each returns the status vd should have, with conditions
// stamped at now when they change.

func base(vd *v1alpha2.VirtualDisk) v1alpha2.VirtualDiskStatus {
	s := *vd.Status.DeepCopy()
	s.ObservedGeneration = vd.Generation
	return s
}

// ProblemStatus: the disk cannot be provisioned; p says why, in its condition and in Ready.
func ProblemStatus(vd *v1alpha2.VirtualDisk, p *Problem, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = p.Phase
	s.Progress, s.DownloadSpeed = "", nil
	if p.Condition != vdcondition.ReadyType {
		setCondition(&s, vd.Generation, now, p.Condition, metav1.ConditionFalse, p.Reason, p.Message)
	}
	reason := p.Reason
	switch p.Condition {
	case vdcondition.DatasourceReadyType:
		reason = string(vdcondition.DatasourceIsNotReady)
	case vdcondition.StorageClassReadyType:
		reason = string(vdcondition.StorageClassIsNotReady)
	}
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, reason, p.Message)
	return s
}

// ProvisioningStatus: the claim exists and the importer fills it; p is its progress when it
// could be read.
func ProvisioningStatus(vd *v1alpha2.VirtualDisk, claim, storageClass string, p *importerprogress.Progress, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskProvisioning
	s.ImageUploadURLs = nil
	s.Target.PersistentVolumeClaimName = claim
	s.StorageClassName = storageClass
	if s.Progress == "" {
		s.Progress = "0%"
	}
	if p != nil {
		if percent, ok := p.Percent(); ok {
			s.Progress = percent
		}
		s.DownloadSpeed = p.Speed()
	}
	sourceReady(&s, vd.Generation, now)
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.Provisioning), "the importer is filling PersistentVolumeClaim "+claim)
	return s
}

// InspectingStatus: a disk without a size waits for its inspector to learn the source's unpacked
// size (no claim yet); p is the inspector's progress when it could be read.
func InspectingStatus(vd *v1alpha2.VirtualDisk, storageClass string, p *importerprogress.Progress, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskProvisioning
	s.StorageClassName = storageClass
	s.Progress = "0%"
	if p != nil {
		s.DownloadSpeed = p.Speed()
	}
	sourceReady(&s, vd.Generation, now)
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.Provisioning),
		"reading the source to learn its unpacked size, the disk's size (spec.persistentVolumeClaim.size is not set); the import follows")
	return s
}

// UploaderStartingStatus: the claim exists and the uploader Pod starts; until it is ready there
// is no URL to upload to.
func UploaderStartingStatus(vd *v1alpha2.VirtualDisk, claim, storageClass string, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskPending
	s.ImageUploadURLs = nil
	s.Target.PersistentVolumeClaimName = claim
	s.StorageClassName = storageClass
	sourceReady(&s, vd.Generation, now)
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.ProvisioningNotStarted),
		"the uploader is starting: the upload URL appears once it is ready")
	return s
}

// WaitForUploadStatus: the uploader waits for the user's upload at urls.
func WaitForUploadStatus(vd *v1alpha2.VirtualDisk, claim, storageClass string, urls *v1alpha2.ImageUploadURLs, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskWaitForUserUpload
	s.Progress = "0%"
	s.ImageUploadURLs = urls
	s.Target.PersistentVolumeClaimName = claim
	s.StorageClassName = storageClass
	sourceReady(&s, vd.Generation, now)
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.WaitForUserUpload), importerpod.UploadHint(urls))
	return s
}

// FailedStatus: the import ended with r, which is no disk (a failure, or an ISO). Its claim is
// deleted, so status names none.
func FailedStatus(vd *v1alpha2.VirtualDisk, r contract.Result, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskFailed
	s.DownloadSpeed = nil
	s.ImageUploadURLs = nil
	s.Capacity = ""
	s.Target.PersistentVolumeClaimName = ""
	msg := fmt.Sprintf("%s: %s", r.Reason, r.Message)
	reason := vdcondition.ProvisioningFailed
	switch {
	case r.Reason == contract.ReasonUploadTimeout:
		reason = vdcondition.WaitForUserUploadTimeout
		msg = r.Message
	case r.Reason == contract.ReasonCompleted && r.CDROM:
		msg = "the source is an ISO image (a CD-ROM), which cannot be a disk: make a VirtualImage or ClusterVirtualImage of it and attach that to the virtual machine as a CD-ROM"
	case r.Reason == contract.ReasonTooLarge:
		msg += "; grow spec.persistentVolumeClaim.size and the import runs again"
	}
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(reason), msg)
	return s
}

// ClaimStatus: the claim holds the disk (or a blank disk's claim waits to be bound).
// waitForFirstConsumer: its StorageClass binds volumes where their first Pod is scheduled.
func ClaimStatus(vd *v1alpha2.VirtualDisk, pvc *corev1.PersistentVolumeClaim, waitForFirstConsumer bool, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.DownloadSpeed = nil
	s.ImageUploadURLs = nil
	s.Target.PersistentVolumeClaimName = pvc.Name
	if pvc.Spec.StorageClassName != nil {
		s.StorageClassName = *pvc.Spec.StorageClassName
	}
	if vd.Spec.DataSource != nil {
		s.Progress = "100%"
	}
	sourceReady(&s, vd.Generation, now)
	request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity, hasCapacity := pvc.Status.Capacity[corev1.ResourceStorage]
	switch {
	case pvc.Status.Phase == corev1.ClaimLost:
		return LostStatus(vd, now)
	case pvc.Status.Phase != corev1.ClaimBound && waitForFirstConsumer:
		s.Phase = v1alpha2.DiskWaitForFirstConsumer
		setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.WaitingForFirstConsumer),
			fmt.Sprintf("StorageClass %s binds the volume where the first virtual machine that uses the disk is scheduled", s.StorageClassName))
		return s
	case pvc.Status.Phase != corev1.ClaimBound:
		s.Phase = v1alpha2.DiskProvisioning
		setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.Provisioning), "PersistentVolumeClaim "+pvc.Name+" waits for its volume")
		return s
	}
	s.Capacity = capacity.String()
	if hasCapacity && capacity.Cmp(request) < 0 {
		s.Phase = v1alpha2.DiskResizing
		msg := fmt.Sprintf("PersistentVolumeClaim %s grows from %s to %s", pvc.Name, capacity.String(), request.String())
		if claimCondition(pvc, corev1.PersistentVolumeClaimFileSystemResizePending) {
			msg += ": its file system grows offline, when no virtual machine uses the disk (stop the virtual machine to finish)"
		}
		setCondition(&s, vd.Generation, now, vdcondition.ResizingType, metav1.ConditionTrue, string(vdcondition.ResizingInProgress), msg)
		// The disk stays usable while it grows.
		setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionTrue, string(vdcondition.Ready), "")
		return s
	}
	s.Phase = v1alpha2.DiskReady
	meta.RemoveStatusCondition(&s.Conditions, string(vdcondition.ResizingType))
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionTrue, string(vdcondition.Ready), "")
	return s
}

// LostStatus: the claim of a provisioned disk is gone, and its data with it.
func LostStatus(vd *v1alpha2.VirtualDisk, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskLost
	s.Capacity = ""
	setCondition(&s, vd.Generation, now, vdcondition.ReadyType, metav1.ConditionFalse, string(vdcondition.Lost),
		fmt.Sprintf("PersistentVolumeClaim %s of the disk is gone, and its data with it: delete the disk and make it again", vd.Status.Target.PersistentVolumeClaimName))
	return s
}

// TerminatingStatus: the disk is deleted, but users still use it; it stays until they are gone.
func TerminatingStatus(vd *v1alpha2.VirtualDisk, users []string, now metav1.Time) v1alpha2.VirtualDiskStatus {
	s := base(vd)
	s.Phase = v1alpha2.DiskTerminating
	msg := "used by " + strings.Join(users, ", ")
	setCondition(&s, vd.Generation, now, vdcondition.InUseType, metav1.ConditionTrue, string(vdcondition.AttachedToVirtualMachine), msg)
	setCondition(&s, vd.Generation, now, vdcondition.TerminatingType, metav1.ConditionTrue, "InUse", "the disk is deleted once nothing uses it: "+msg)
	return s
}

// ResizeTo is the request vd's claim must grow to, or nil when it is large enough (or the disk
// has no size of its own: it was sized from its image).
func ResizeTo(vd *v1alpha2.VirtualDisk, pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	size := vd.Spec.PersistentVolumeClaim.Size
	if size == nil {
		return nil
	}
	want := storageclass.ClaimRequest(size.Value())
	have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return nil
	}
	return &want
}

func claimCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func sourceReady(s *v1alpha2.VirtualDiskStatus, gen int64, now metav1.Time) {
	setCondition(s, gen, now, vdcondition.DatasourceReadyType, metav1.ConditionTrue, string(vdcondition.DatasourceReady), "")
	setCondition(s, gen, now, vdcondition.StorageClassReadyType, metav1.ConditionTrue, string(vdcondition.StorageClassReady), "")
}

func setCondition(s *v1alpha2.VirtualDiskStatus, gen int64, now metav1.Time, typ vdcondition.Type, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type: string(typ), Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now,
	})
}
