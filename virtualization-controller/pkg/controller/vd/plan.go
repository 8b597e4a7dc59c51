// Package vd reconciles VirtualDisks: a PersistentVolumeClaim of the disk's namespace, filled by
// an importer Pod next to it (from an HTTP URL, a registry image, or a ClusterVirtualImage or
// VirtualImage in DVCR) or left blank, grown when spec.persistentVolumeClaim.size grows, and
// kept while a virtual machine uses it.
package vd

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/virtualization-controller/pkg/humansize"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// AnnotationSourceSize on a disk without a size is its source's unpacked size in bytes, as its
// inspector found it: the disk's size.
const AnnotationSourceSize = "virtualization.deckhouse.io/vd-source-size"

// Image is what a disk needs to know of the ClusterVirtualImage or VirtualImage its objectRef
// names.
type Image struct {
	UID   types.UID
	Phase v1alpha2.ImagePhase
	// RegistryURL is the image in DVCR (status.target.registryURL); empty for an image kept on a PVC.
	RegistryURL string
	// Claim is the claim that keeps an image with storage PersistentVolumeClaim (with its volume
	// mode: Block), copied as a disk is.
	Claim         string
	Block         bool
	UnpackedBytes int64
	CDROM         bool
}

// SourceDisk is what a disk copied from another VirtualDisk (its objectRef) needs to know of it.
type SourceDisk struct {
	UID   types.UID
	Phase v1alpha2.DiskPhase
	// Claim is its PersistentVolumeClaim, "" while it has none; Block: the claim is a Block volume.
	Claim string
	Block bool
	// SizeBytes is its size: the least the copy must hold.
	SizeBytes int64
	// RunningVMs are the virtual machines that have it mounted now.
	RunningVMs []string
}

// Deps are the objects a new disk's plan depends on, as the reconciler found them.
type Deps struct {
	StorageClasses []storagev1.StorageClass
	// Image is the objectRef's image; nil when it does not exist.
	Image *Image
	// Disk is the objectRef's VirtualDisk; nil when it does not exist.
	Disk *SourceDisk
	// PullSecretFound: the containerImage's imagePullSecret exists.
	PullSecretFound bool
}

// Plan is how a disk is provisioned: its claim and what fills it.
type Plan struct {
	StorageClass string
	VolumeMode   corev1.PersistentVolumeMode
	AccessMode   corev1.PersistentVolumeAccessMode
	// WaitForFirstConsumer: the class binds volumes where their first Pod is scheduled.
	WaitForFirstConsumer bool
	// Size is the disk's size: spec.persistentVolumeClaim.size, or the source's unpacked size
	// (an image's, or what an inspection found: AnnotationSourceSize).
	Size resource.Quantity
	// Inspect: the size is not known yet; an inspector learns it before the claim is made (an
	// upload's stager, which keeps the upload for the claim's importer).
	Inspect bool
	// Source is what the importer reads; nil for a blank disk.
	Source *Source
	// SourceUID is the UID of an objectRef's image or disk (status.sourceUID).
	SourceUID types.UID
}

// Source is what an importer Pod reads: a URL, an image, another disk's claim, or the user's
// upload (one of them).
type Source struct {
	// Disk is a VirtualDisk of the same namespace: the importer mounts its claim and copies it.
	Disk *SourceDisk
	// Upload: the importer is an uploader; it takes the user's `curl -T` with the disk's token.
	Upload   bool
	URL      string
	Checksum *v1alpha2.Checksum
	Image    string
	// PullSecret is a Secret of the disk's namespace with the registry's .dockerconfigjson.
	PullSecret string
	CABundle   []byte
	// DVCR: Image is in DVCR; the importer reads it through a DVCR exporter, at URL with
	// ExportToken.
	DVCR        bool
	ExportToken []byte
}

// Problem is why a disk cannot be provisioned: Pending while it may resolve itself (a source
// that is not there or not ready yet), Failed when the spec must change.
type Problem struct {
	Phase     v1alpha2.DiskPhase
	Condition vdcondition.Type
	Reason    string
	Message   string
}

func pending(c vdcondition.Type, reason, format string, args ...any) *Problem {
	return &Problem{Phase: v1alpha2.DiskPending, Condition: c, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func failed(c vdcondition.Type, reason, format string, args ...any) *Problem {
	return &Problem{Phase: v1alpha2.DiskFailed, Condition: c, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// MakePlan decides how vd is provisioned from deps, or why it cannot be. It is pure.
func MakePlan(vd *v1alpha2.VirtualDisk, deps Deps) (Plan, *Problem) {
	var plan Plan
	class, err := storageclass.Choose("spec.persistentVolumeClaim.storageClassName", vd.Spec.PersistentVolumeClaim.StorageClassName, deps.StorageClasses)
	if err != nil {
		return Plan{}, classProblem(err)
	}
	plan.StorageClass, plan.VolumeMode, plan.AccessMode, plan.WaitForFirstConsumer = class.Name, class.VolumeMode, class.AccessMode, class.WaitForFirstConsumer

	size := vd.Spec.PersistentVolumeClaim.Size
	ds := vd.Spec.DataSource
	var unpacked int64
	switch {
	case ds == nil:
		if size == nil {
			return Plan{}, failed(vdcondition.ReadyType, string(vdcondition.ProvisioningNotStarted),
				"spec.persistentVolumeClaim.size is required for a blank disk (no spec.dataSource)")
		}
	case ds.Type == v1alpha2.DataSourceTypeHTTP:
		plan.Source = &Source{URL: ds.HTTP.URL, Checksum: ds.HTTP.Checksum, CABundle: ds.HTTP.CABundle}
	case ds.Type == v1alpha2.DataSourceTypeContainerImage:
		ci := ds.ContainerImage
		plan.Source = &Source{Image: ci.Image, CABundle: ci.CABundle}
		if ci.ImagePullSecret != nil {
			if !deps.PullSecretFound {
				return Plan{}, pending(vdcondition.DatasourceReadyType, string(vdcondition.ContainerRegistrySecretNotFound),
					"spec.dataSource.containerImage.imagePullSecret: Secret %s/%s not found: create it (type kubernetes.io/dockerconfigjson)", vd.Namespace, ci.ImagePullSecret.Name)
			}
			plan.Source.PullSecret = ci.ImagePullSecret.Name
		}
	case ds.Type == v1alpha2.DataSourceTypeObjectRef && ds.ObjectRef.Kind == v1alpha2.VirtualDiskKind:
		disk, problem := objectRefDisk(vd, deps.Disk)
		if problem != nil {
			return Plan{}, problem
		}
		plan.Source = &Source{Disk: disk}
		plan.SourceUID = disk.UID
		unpacked = disk.SizeBytes
	case ds.Type == v1alpha2.DataSourceTypeObjectRef:
		img, problem := objectRefImage(vd, deps.Image)
		if problem != nil {
			return Plan{}, problem
		}
		plan.Source = &Source{Image: img.RegistryURL, DVCR: true}
		if img.RegistryURL == "" {
			plan.Source = &Source{Disk: &SourceDisk{Claim: img.Claim, Block: img.Block}}
		}
		plan.SourceUID = img.UID
		unpacked = img.UnpackedBytes
	case ds.Type == v1alpha2.DataSourceTypeUpload:
		plan.Source = &Source{Upload: true}
	default:
		return Plan{}, pending(vdcondition.DatasourceReadyType, "UnsupportedDataSource",
			"spec.dataSource.type %s is not supported by this version of virtualization-controller: use HTTP, ContainerImage, ObjectRef or Upload", ds.Type)
	}

	switch {
	case size != nil && unpacked > 0 && size.Value() < unpacked:
		return Plan{}, failed(vdcondition.ReadyType, string(vdcondition.ProvisioningFailed),
			"spec.persistentVolumeClaim.size %s is smaller than the source's size %s: make it at least %s", size.String(), humansize.Format(unpacked), humansize.Format(unpacked))
	case size != nil:
		plan.Size = *size
	case unpacked > 0:
		plan.Size = *resource.NewQuantity(unpacked, resource.BinarySI)
	default:
		// A URL, a registry image or an upload: its size is the source's unpacked size, learnt
		// first (an upload is staged by a stager, which learns it).
		if q, err := resource.ParseQuantity(vd.Annotations[AnnotationSourceSize]); err == nil && q.Sign() > 0 {
			plan.Size = *resource.NewQuantity(q.Value(), resource.BinarySI)
		} else {
			plan.Inspect = true
		}
	}
	return plan, nil
}

// classProblem is the disk's Problem with its class: Pending while it is missing, Failed when
// its annotations are wrong.
func classProblem(err error) *Problem {
	var e *storageclass.Error
	if errors.As(err, &e) && e.Missing {
		return pending(vdcondition.StorageClassReadyType, string(vdcondition.StorageClassNotReady), "%s", e.Message)
	}
	return failed(vdcondition.StorageClassReadyType, string(vdcondition.StorageClassNotReady), "%s", err.Error())
}

// objectRefImage checks the image an objectRef names: it must exist, be Ready, be in DVCR and
// not be an ISO.
func objectRefImage(vd *v1alpha2.VirtualDisk, img *Image) (*Image, *Problem) {
	ref := vd.Spec.DataSource.ObjectRef
	cluster := ref.Kind == v1alpha2.ClusterVirtualImageKind
	what := fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	if !cluster {
		what = fmt.Sprintf("%s %s/%s", ref.Kind, vd.Namespace, ref.Name)
	}
	notFound, notReady := vdcondition.ImageNotFound, vdcondition.ImageNotReady
	if cluster {
		notFound, notReady = vdcondition.ClusterImageNotFound, vdcondition.ClusterImageNotReady
	}
	switch {
	case img == nil:
		return nil, pending(vdcondition.DatasourceReadyType, string(notFound), "spec.dataSource.objectRef: %s not found: the disk waits for it", what)
	case img.Phase != v1alpha2.ImageReady:
		return nil, pending(vdcondition.DatasourceReadyType, string(notReady), "spec.dataSource.objectRef: %s is %s, not Ready: the disk waits for it", what, phaseOr(img.Phase))
	case img.CDROM:
		return nil, failed(vdcondition.DatasourceReadyType, "ISOSourceRefused", "spec.dataSource.objectRef: %s is an ISO image (a CD-ROM), which cannot be a disk: attach it to the virtual machine as a CD-ROM instead", what)
	case img.RegistryURL == "" && img.Claim == "":
		return nil, pending(vdcondition.DatasourceReadyType, string(notReady), "spec.dataSource.objectRef: %s has neither an image in DVCR nor a PersistentVolumeClaim yet: the disk waits for it", what)
	}
	return img, nil
}

// objectRefDisk checks the VirtualDisk an objectRef names: it must exist, be another disk, be
// Ready with its claim, and no running machine may have it mounted (the copy would not be
// consistent).
func objectRefDisk(vd *v1alpha2.VirtualDisk, d *SourceDisk) (*SourceDisk, *Problem) {
	name := vd.Spec.DataSource.ObjectRef.Name
	what := fmt.Sprintf("VirtualDisk %s/%s", vd.Namespace, name)
	switch {
	case name == vd.Name:
		return nil, failed(vdcondition.DatasourceReadyType, string(vdcondition.VirtualDiskNotFound), "spec.dataSource.objectRef: a disk cannot be copied from itself: name another VirtualDisk")
	case d == nil:
		return nil, pending(vdcondition.DatasourceReadyType, string(vdcondition.VirtualDiskNotFound), "spec.dataSource.objectRef: %s not found: the disk waits for it", what)
	case d.Phase != v1alpha2.DiskReady || d.Claim == "":
		phase := d.Phase
		if phase == "" {
			phase = v1alpha2.DiskPending
		}
		return nil, pending(vdcondition.DatasourceReadyType, string(vdcondition.VirtualDiskNotReady), "spec.dataSource.objectRef: %s is %s, not Ready: the disk waits for it", what, phase)
	case len(d.RunningVMs) > 0:
		return nil, pending(vdcondition.DatasourceReadyType, string(vdcondition.VirtualDiskAttachedToRunningVM),
			"spec.dataSource.objectRef: %s is in use by the running virtual machine %s: the copy starts once it is stopped, so that it is consistent", what, strings.Join(d.RunningVMs, ", "))
	}
	return d, nil
}

func phaseOr(p v1alpha2.ImagePhase) v1alpha2.ImagePhase {
	if p == "" {
		return v1alpha2.ImagePending
	}
	return p
}
