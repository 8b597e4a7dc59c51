package image

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/cvicondition"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

// Finalizer is kept on every image of the kind short ("cvi" or "vi") until its importer Pod and
// its image in DVCR are gone.
func Finalizer(short string) string { return "virtualization.deckhouse.io/" + short + "-cleanup" }

// Step is the one thing a reconcile does next.
type Step int

const (
	// StepNone: the image is where it should be.
	StepNone Step = iota
	// StepAddFinalizer: a new image gets the Finalizer before anything is created for it.
	StepAddFinalizer
	// StepCleanup: the image is being deleted: its Pod goes, then its image in DVCR, then the
	// Finalizer.
	StepCleanup
	// StepDeletePod: the import is recorded (or the Pod belongs to an older image of that name).
	StepDeletePod
	// StepStart: start the import if the source allows it (CheckSource), else say what it waits for.
	StepStart
	// StepWatchProgress: the import runs; read its progress.
	StepWatchProgress
	// StepRecordResult: the importer ended; its result goes into status.
	StepRecordResult
	// StepFill: an image kept on a claim is in DVCR: its claim is made and filled from there.
	StepFill
)

func (s Step) String() string {
	return [...]string{"None", "AddFinalizer", "Cleanup", "DeletePod", "Start", "WatchProgress", "RecordResult", "Fill"}[s]
}

// Decide is the next step for img of kind short, given its importer Pod and its helpers (a
// VirtualDisk source's exporter, the filler of an image kept on a claim), each nil when there
// is none.
func Decide(short string, img Image, pod *corev1.Pod, helpers ...*corev1.Pod) Step {
	obj := img.Object
	hasFinalizer := false
	for _, f := range obj.GetFinalizers() {
		hasFinalizer = hasFinalizer || f == Finalizer(short)
	}
	switch {
	case obj.GetDeletionTimestamp() != nil && hasFinalizer:
		return StepCleanup
	case obj.GetDeletionTimestamp() != nil:
		return StepNone
	case !hasFinalizer:
		return StepAddFinalizer
	case stale(pod, obj.GetUID()) || slices.ContainsFunc(helpers, func(p *corev1.Pod) bool { return stale(p, obj.GetUID()) }):
		return StepDeletePod
	case finished(img):
		if pod != nil || slices.ContainsFunc(helpers, func(p *corev1.Pod) bool { return p != nil }) {
			return StepDeletePod
		}
		return StepNone
	case pod == nil && Imported(img):
		return StepFill
	case pod == nil:
		return StepStart
	case importerresult.Done(pod):
		return StepRecordResult
	default:
		return StepWatchProgress
	}
}

// stale: pod belongs to an older image of that name.
func stale(pod *corev1.Pod, uid types.UID) bool {
	return pod != nil && pod.Labels[LabelImageUID] != string(uid)
}

// Imported: an image kept on a claim is in DVCR (its import's result, the size, is recorded);
// the claim is filled next.
func Imported(img Image) bool {
	return img.Storage == v1alpha2.StoragePersistentVolumeClaim && img.Status.Size.UnpackedBytes != ""
}

// finished: the current spec's import has been recorded as Ready or Failed.
func finished(img Image) bool {
	p := img.Status.Phase
	return img.Status.ObservedGeneration == img.Object.GetGeneration() && (p == v1alpha2.ImageReady || p == v1alpha2.ImageFailed)
}

// Lookup is what the reconciler found of the objects an image's source names.
type Lookup struct {
	// Ref is the object of an ObjectRef source; nil when it does not exist.
	Ref *RefState
	// PullSecretFound: the ContainerImage's imagePullSecret exists; PullSecret is its
	// .dockerconfigjson.
	PullSecretFound bool
	PullSecret      []byte
	// ExportURL and ExportToken are where a VirtualDisk source's exporter serves it, and its
	// token, once it runs.
	ExportURL   string
	ExportToken []byte
}

// RefState is what an ObjectRef source's object looks like.
type RefState struct {
	UID   types.UID
	Phase string
	// Repository is its DVCR repository, "" when it is not stored in DVCR.
	Repository string
	// Disk is set for a VirtualDisk.
	Disk *DiskRef
}

// DiskRef is what an import reads of a source VirtualDisk.
type DiskRef struct {
	// Claim is its PersistentVolumeClaim (status.target), in its namespace; Block says the
	// claim's volume mode is Block.
	Claim string
	Block bool
	// RunningVMs are the virtual machines that have it mounted now.
	RunningVMs []string
}

// Blocker says why an import cannot start now.
type Blocker struct {
	// Reason is the DatasourceReady condition's reason.
	Reason string
	// Message says what is missing or what to fix.
	Message string
	// Wait: it may resolve by itself (a source object that appears or becomes Ready, a Secret
	// that is created): look again later.
	Wait bool
}

// The DatasourceReady reasons of a source, or a storage, this version cannot import.
const (
	ReasonUnsupportedDataSource = "UnsupportedDataSource"
	ReasonUnsupportedStorage    = "UnsupportedStorage"
)

// CheckSource is nil when img can be imported now, given what l found of its source's objects.
func CheckSource(img Image, l Lookup) *Blocker {
	unsupported := func(format string, a ...any) *Blocker {
		return &Blocker{Reason: ReasonUnsupportedDataSource, Message: fmt.Sprintf(format, a...)}
	}
	if img.Storage != v1alpha2.StorageContainerRegistry && img.Storage != v1alpha2.StoragePersistentVolumeClaim {
		return &Blocker{Reason: ReasonUnsupportedStorage, Message: fmt.Sprintf(
			"spec.storage %s is not supported: use ContainerRegistry or PersistentVolumeClaim", img.Storage)}
	}
	src := img.Source
	switch src.Type {
	case v1alpha2.DataSourceTypeHTTP:
		if src.HTTP == nil {
			return unsupported("spec.dataSource.http is missing")
		}
	case v1alpha2.DataSourceTypeContainerImage:
		switch {
		case src.ContainerImage == nil:
			return unsupported("spec.dataSource.containerImage is missing")
		case src.PullSecret != nil && !l.PullSecretFound:
			return &Blocker{Reason: string(cvicondition.ContainerRegistrySecretNotFound), Wait: true, Message: fmt.Sprintf(
				"the Secret %s of spec.dataSource.containerImage.imagePullSecret does not exist: create it (type kubernetes.io/dockerconfigjson) and the import starts", src.PullSecret)}
		case src.PullSecret != nil && len(l.PullSecret) == 0:
			return &Blocker{Reason: string(cvicondition.ContainerRegistrySecretNotFound), Wait: true, Message: fmt.Sprintf(
				"the Secret %s of spec.dataSource.containerImage.imagePullSecret has no %s: make it a Secret of type kubernetes.io/dockerconfigjson", src.PullSecret, corev1.DockerConfigJsonKey)}
		}
	case v1alpha2.DataSourceTypeObjectRef:
		return checkRef(src.Ref, l.Ref, unsupported)
	case v1alpha2.DataSourceTypeUpload:
	default:
		return unsupported("spec.dataSource.type %s is not supported by this version of virtualization-controller: HTTP, ContainerImage, ObjectRef and Upload are", src.Type)
	}
	return nil
}

func checkRef(ref *ObjectRef, found *RefState, unsupported func(string, ...any) *Blocker) *Blocker {
	if ref == nil {
		return unsupported("spec.dataSource.objectRef is missing")
	}
	reason := map[string]string{
		v1alpha2.ClusterVirtualImageKind: string(cvicondition.ClusterImageNotReady),
		v1alpha2.VirtualImageKind:        string(cvicondition.ImageNotReady),
		v1alpha2.VirtualDiskKind:         string(cvicondition.VirtualDiskNotReady),
	}[ref.Kind]
	what := fmt.Sprintf("the %s %s of spec.dataSource.objectRef", ref.Kind, ref.NamespacedName)
	if ref.Namespace == "" {
		what = fmt.Sprintf("the %s %s of spec.dataSource.objectRef", ref.Kind, ref.Name)
	}
	switch {
	case reason == "":
		return unsupported("spec.dataSource.objectRef.kind %s is not supported: ClusterVirtualImage, VirtualImage and VirtualDisk are", ref.Kind)
	case found == nil:
		return &Blocker{Reason: reason, Wait: true, Message: what + " does not exist yet: the import starts when it is Ready"}
	case found.Phase != string(v1alpha2.ImageReady):
		phase := found.Phase
		if phase == "" {
			phase = string(v1alpha2.ImagePending)
		}
		return &Blocker{Reason: reason, Wait: true, Message: fmt.Sprintf("%s is %s, not Ready yet: the import starts when it is Ready", what, phase)}
	case found.Disk == nil && found.Repository == "":
		return &Blocker{Reason: reason, Wait: true, Message: what + " has no PersistentVolumeClaim yet"}
	case found.Disk != nil && len(found.Disk.RunningVMs) > 0:
		return &Blocker{Reason: string(cvicondition.VirtualDiskAttachedToRunningVM), Wait: true, Message: fmt.Sprintf(
			"%s is in use by the running virtual machine %s: the import starts once it is stopped, so that the image is consistent", what, strings.Join(found.Disk.RunningVMs, ", "))}
	}
	return nil
}

// InDVCR says whether DVCR may hold the image: it is Ready, or an import ran (or an upload
// waited) and may have pushed before it was recorded. A failed import pushes no tag (the
// importer pushes the manifest last), and a Pending image never started one. An image kept on
// a claim leaves DVCR before it is Ready.
func InDVCR(img Image) bool {
	p := img.Status.Phase
	if p == v1alpha2.ImageReady {
		return img.Storage != v1alpha2.StoragePersistentVolumeClaim
	}
	return p == v1alpha2.ImageProvisioning || p == v1alpha2.ImageWaitForUserUpload
}

// WaitsForUpload: the image's uploader waits for the user's upload: nothing has come yet (p,
// the importer's progress, read nothing; when it could not be read, nil, the phase stays).
func WaitsForUpload(img Image, p *importerprogress.Progress) bool {
	if img.Source.Type != v1alpha2.DataSourceTypeUpload {
		return false
	}
	return importerpod.UploadNotBegun(p, img.Status.Phase != v1alpha2.ImageProvisioning)
}
