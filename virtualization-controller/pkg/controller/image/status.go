package image

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/cvicondition"
	"github.com/d8virt/api/core/v1alpha2/vicondition"
	"github.com/d8virt/virtualization-controller/pkg/humansize"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// The condition types and reasons both kinds share (cvicondition and vicondition spell them the
// same; TestConditionNames checks it).
const (
	condDatasourceReady = string(cvicondition.DatasourceReadyType)
	condReady           = string(cvicondition.ReadyType)
)

// The status builders below are pure: each returns the status img should have, with
// conditions stamped at now when they change.

// PendingStatus: the import cannot start; b says why.
func PendingStatus(img Image, b Blocker, now metav1.Time) Status {
	s := copyStatus(img)
	s.Phase = v1alpha2.ImagePending
	setCondition(&s, img, now, condDatasourceReady, metav1.ConditionFalse, b.Reason, b.Message)
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.ProvisioningNotStarted), "the import has not started: "+b.Message)
	return s
}

// ProvisioningStatus: the import runs; p is its progress when it could be read.
func ProvisioningStatus(img Image, p *importerprogress.Progress, now metav1.Time) Status {
	s := copyStatus(img)
	s.Phase = v1alpha2.ImageProvisioning
	if s.Progress == "" {
		s.Progress = "0%"
	}
	if p != nil {
		if percent, ok := p.Percent(); ok {
			s.Progress = percent
		}
		s.DownloadSpeed = p.Speed()
	}
	setCondition(&s, img, now, condDatasourceReady, metav1.ConditionTrue, string(cvicondition.DatasourceReady), "")
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.Provisioning), "the importer is downloading the image into DVCR")
	return s
}

// UploaderStartingStatus: the uploader Pod is not ready yet, so there is no URL to upload to.
func UploaderStartingStatus(img Image, now metav1.Time) Status {
	s := copyStatus(img)
	s.Phase = v1alpha2.ImagePending
	s.ImageUploadURLs = nil
	setCondition(&s, img, now, condDatasourceReady, metav1.ConditionTrue, string(cvicondition.DatasourceReady), "")
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.ProvisioningNotStarted),
		"the uploader is starting: the upload URL appears once it is ready")
	return s
}

// WaitForUploadStatus: the uploader waits for the user's upload at urls.
func WaitForUploadStatus(img Image, urls *v1alpha2.ImageUploadURLs, now metav1.Time) Status {
	s := copyStatus(img)
	s.Phase = v1alpha2.ImageWaitForUserUpload
	s.Progress = "0%"
	s.ImageUploadURLs = urls
	setCondition(&s, img, now, condDatasourceReady, metav1.ConditionTrue, string(cvicondition.DatasourceReady), "")
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.WaitForUserUpload),
		importerpod.UploadHint(urls))
	return s
}

// ResultStatus: the importer ended with r. A failure keeps the importer's reason in the Ready
// condition's message, so `kubectl describe` says what to fix.
func ResultStatus(img Image, r contract.Result, registryURL string, now metav1.Time) Status {
	s := copyStatus(img)
	s.DownloadSpeed = nil
	s.ImageUploadURLs = nil // the uploader is gone
	if r.Reason != contract.ReasonCompleted {
		s.Phase = v1alpha2.ImageFailed
		reason := cvicondition.ProvisioningFailed
		if r.Reason == contract.ReasonUploadTimeout {
			reason = cvicondition.WaitForUserUploadTimeout
		}
		setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(reason), fmt.Sprintf("%s: %s", r.Reason, r.Message))
		return s
	}
	s.Phase = v1alpha2.ImageReady
	s.Progress = "100%"
	s.Format = r.Format
	s.CDROM = r.CDROM
	s.Size = v1alpha2.ImageStatusSize{
		Stored: humansize.Format(r.StoredSize), StoredBytes: strconv.FormatInt(r.StoredSize, 10),
		Unpacked: humansize.Format(r.UnpackedSize), UnpackedBytes: strconv.FormatInt(r.UnpackedSize, 10),
	}
	s.RegistryURL = registryURL
	setCondition(&s, img, now, condReady, metav1.ConditionTrue, string(cvicondition.Ready), "")
	return s
}

func copyStatus(img Image) Status {
	s := img.Status
	s.ImageStatus = *img.Status.ImageStatus.DeepCopy()
	s.ObservedGeneration = img.Object.GetGeneration()
	return s
}

func setCondition(s *Status, img Image, now metav1.Time, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: img.Object.GetGeneration(), LastTransitionTime: now,
	})
}

// The status of an image kept on a claim, after its import into DVCR.

// ImportedStatus: the import into DVCR ended with r (Completed); the claim is filled next.
func ImportedStatus(img Image, r contract.Result, now metav1.Time) Status {
	s := copyStatus(img)
	s.Phase = v1alpha2.ImageProvisioning
	s.DownloadSpeed = nil
	s.ImageUploadURLs = nil
	s.Progress = "0%"
	s.Format, s.CDROM = r.Format, r.CDROM
	s.Size = v1alpha2.ImageStatusSize{
		Stored: humansize.Format(r.StoredSize), StoredBytes: strconv.FormatInt(r.StoredSize, 10),
		Unpacked: humansize.Format(r.UnpackedSize), UnpackedBytes: strconv.FormatInt(r.UnpackedSize, 10),
	}
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.Provisioning), "the image is in DVCR; it is copied into a PersistentVolumeClaim next")
	return s
}

// FillingStatus: the filler copies the image into claim (of class); p is its progress when it
// could be read.
func FillingStatus(img Image, claim, class string, p *importerprogress.Progress, now metav1.Time) Status {
	s := ProvisioningStatus(img, p, now)
	s.ClaimName, s.StorageClassName = claim, class
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: string(vicondition.StorageClassReadyType), Status: metav1.ConditionTrue,
		Reason: string(vicondition.StorageClassReady), ObservedGeneration: img.Object.GetGeneration(), LastTransitionTime: now})
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.Provisioning), "the image is being copied from DVCR into PersistentVolumeClaim "+claim)
	return s
}

// FilledStatus: the claim holds the image (r is the filler's result: the blocks it takes).
func FilledStatus(img Image, r contract.Result, now metav1.Time) Status {
	s := copyStatus(img)
	s.Phase = v1alpha2.ImageReady
	s.Progress = "100%"
	s.DownloadSpeed = nil
	s.RegistryURL = ""
	s.Size.Stored, s.Size.StoredBytes = humansize.Format(r.StoredSize), strconv.FormatInt(r.StoredSize, 10)
	setCondition(&s, img, now, condReady, metav1.ConditionTrue, string(cvicondition.Ready), "")
	return s
}

// StorageClassStatus: the image's claim cannot be made in its class (err is a
// storageclass.Error): Pending while the class is missing, Failed when it must change.
func StorageClassStatus(img Image, err error, now metav1.Time) Status {
	s := copyStatus(img)
	var e *storageclass.Error
	missing := errors.As(err, &e) && e.Missing
	reason := vicondition.StorageClassNotReady
	s.Phase = v1alpha2.ImageFailed
	if missing {
		s.Phase, reason = v1alpha2.ImagePending, vicondition.StorageClassNotFound
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: string(vicondition.StorageClassReadyType), Status: metav1.ConditionFalse,
		Reason: string(reason), Message: err.Error(), ObservedGeneration: img.Object.GetGeneration(), LastTransitionTime: now})
	setCondition(&s, img, now, condReady, metav1.ConditionFalse, string(cvicondition.ProvisioningNotStarted), "the image's PersistentVolumeClaim cannot be made: "+err.Error())
	return s
}
