// Package importerresult reads the outcome of an importer Pod: whether its importer container
// has ended, and the importer's result from its termination message. Controllers that run
// importer Pods share it; it does no IO.
package importerresult

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Container is the name of the importer Pod's container.
const Container = "importer"

// Done says whether the importer Pod has ended: the Pod or its importer container.
func Done(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || terminated(pod) != nil
}

func terminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == Container && s.State.Terminated != nil {
			return s.State.Terminated
		}
	}
	return nil
}

// Of is the outcome of an ended importer Pod: the importer's result from its termination
// message, or a failure that says what happened to the Pod.
func Of(pod *corev1.Pod) contract.Result {
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

// Seconds is how long the ended importer Pod took, from its creation to its container's end; 0
// when that is not known.
func Seconds(pod *corev1.Pod) float64 {
	t := terminated(pod)
	if t == nil || t.FinishedAt.IsZero() || pod.CreationTimestamp.IsZero() {
		return 0
	}
	return t.FinishedAt.Sub(pod.CreationTimestamp.Time).Seconds()
}
