// Package cvi reconciles ClusterVirtualImages: an importer Pod in the module's namespace
// downloads the image's source into DVCR (cvi/<name>:latest); its metrics feed status.progress
// while it runs and its termination message the final status.
package cvi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Finalizer is kept on every ClusterVirtualImage until its importer Pod is gone.
const Finalizer = "virtualization.deckhouse.io/cvi-cleanup"

// Step is the one thing a reconcile does next.
type Step int

const (
	// StepNone: the image is where it should be.
	StepNone Step = iota
	// StepAddFinalizer: a new image gets the Finalizer before anything is created for it.
	StepAddFinalizer
	// StepCleanup: the image is being deleted: its Pod goes, then the Finalizer.
	StepCleanup
	// StepDeletePod: the import is recorded (or the Pod belongs to an older image of that name).
	StepDeletePod
	// StepUnsupportedSource: the source cannot be imported (yet): Pending with the reason.
	StepUnsupportedSource
	// StepCreatePod: start the import.
	StepCreatePod
	// StepWatchProgress: the import runs; read its progress.
	StepWatchProgress
	// StepRecordResult: the importer ended; its result goes into status.
	StepRecordResult
)

func (s Step) String() string {
	return [...]string{"None", "AddFinalizer", "Cleanup", "DeletePod", "UnsupportedSource", "CreatePod", "WatchProgress", "RecordResult"}[s]
}

// Decide is the next step for cvi, given its importer Pod (nil when there is none).
func Decide(cvi *v1alpha2.ClusterVirtualImage, pod *corev1.Pod) Step {
	hasFinalizer := false
	for _, f := range cvi.Finalizers {
		hasFinalizer = hasFinalizer || f == Finalizer
	}
	switch {
	case cvi.DeletionTimestamp != nil && hasFinalizer:
		return StepCleanup
	case cvi.DeletionTimestamp != nil:
		return StepNone
	case !hasFinalizer:
		return StepAddFinalizer
	case pod != nil && !ownedBy(pod, cvi):
		return StepDeletePod
	case finished(cvi):
		if pod != nil {
			return StepDeletePod
		}
		return StepNone
	case unsupported(cvi.Spec.DataSource) != "":
		return StepUnsupportedSource
	case pod == nil:
		return StepCreatePod
	case podDone(pod):
		return StepRecordResult
	default:
		return StepWatchProgress
	}
}

// finished: the current spec's import has been recorded as Ready or Failed.
func finished(cvi *v1alpha2.ClusterVirtualImage) bool {
	p := cvi.Status.Phase
	return cvi.Status.ObservedGeneration == cvi.Generation && (p == v1alpha2.ImageReady || p == v1alpha2.ImageFailed)
}

func ownedBy(pod *corev1.Pod, cvi *v1alpha2.ClusterVirtualImage) bool {
	for _, o := range pod.OwnerReferences {
		if o.UID == cvi.UID {
			return true
		}
	}
	return false
}

// unsupported says why ds cannot be imported by this controller yet, or "".
func unsupported(ds v1alpha2.ClusterVirtualImageDataSource) string {
	switch {
	case ds.Type != v1alpha2.DataSourceTypeHTTP:
		return fmt.Sprintf("spec.dataSource.type %s is not supported by this version of virtualization-controller yet: only HTTP is", ds.Type)
	case ds.HTTP == nil:
		return "spec.dataSource.http is missing"
	case len(ds.HTTP.CABundle) > 0:
		return "spec.dataSource.http.caBundle is not supported by this version of virtualization-controller yet"
	}
	return ""
}

// InDVCR says whether DVCR may hold the image: it is Ready, or an import ran and may have pushed
// before it was recorded. A failed import pushes no tag (the importer pushes the manifest last),
// and a Pending image never started one.
func InDVCR(cvi *v1alpha2.ClusterVirtualImage) bool {
	p := cvi.Status.Phase
	return p == v1alpha2.ImageReady || p == v1alpha2.ImageProvisioning
}

// importerContainer is the name of the importer Pod's one container.
const importerContainer = "importer"

func podDone(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	t := terminated(pod)
	return t != nil
}

func terminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == importerContainer && s.State.Terminated != nil {
			return s.State.Terminated
		}
	}
	return nil
}

// ResultOf is the outcome of a finished importer Pod: the importer's own result from its
// termination message, or a failure that says what happened to the Pod.
func ResultOf(pod *corev1.Pod) contract.Result {
	t := terminated(pod)
	if t == nil {
		return contract.Result{Reason: contract.ReasonInternal, Message: fmt.Sprintf("the importer Pod %s/%s ended (%s) without its container terminating: %s", pod.Namespace, pod.Name, pod.Status.Phase, pod.Status.Message)}
	}
	r, err := contract.ParseResult([]byte(t.Message))
	if err != nil {
		return contract.Result{Reason: contract.ReasonInternal, Message: fmt.Sprintf("the importer exited with code %d (%s) without a result: %v", t.ExitCode, t.Reason, err)}
	}
	return r
}
