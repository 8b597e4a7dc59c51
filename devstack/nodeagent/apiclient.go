package nodeagent

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// podsClient writes pod status without ever dropping a condition that someone else wrote: before
// each status update it takes the conditions the node does not own (readiness gates, ...) from the
// pod as the API has it now, re-evaluates Ready against them, and retries on conflicts. A status
// that is the API's already is not written.
type podsClient struct {
	kube kubernetes.Interface
}

func (c podsClient) Pods(namespace string) corev1client.PodInterface {
	return statusMergingPods{PodInterface: c.kube.CoreV1().Pods(namespace)}
}

type statusMergingPods struct {
	corev1client.PodInterface
}

func (s statusMergingPods) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	var lastErr error
	for try := 0; try < 5; try++ {
		live, err := s.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if live.UID != pod.UID {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		out := pod.DeepCopy()
		out.ResourceVersion = live.ResourceVersion
		MergeForeignConditions(&live.Spec, &out.Status, live.Status.Conditions, metav1.Now())
		if out.Status.QOSClass == "" {
			out.Status.QOSClass = live.Status.QOSClass
		}
		if equality.Semantic.DeepEqual(out.Status, live.Status) {
			// Nothing new: a write would change nothing and still cost the apiserver a request.
			return live, nil
		}
		updated, err := s.PodInterface.UpdateStatus(ctx, out, opts)
		if err == nil || !apierrors.IsConflict(err) {
			return updated, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// quietRecorder drops the pod controller's "ProviderDeleteFailed" events for errTerminating: a pod
// that is shutting down has not failed anything.
type quietRecorder struct {
	record.EventRecorder
}

func (q quietRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if reason == "ProviderDeleteFailed" && strings.Contains(message, errTerminating.Error()) {
		return
	}
	q.EventRecorder.Event(obj, eventtype, reason, message)
}
