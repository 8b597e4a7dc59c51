package nodeagent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// A stopped stack keeps its pods' last status in etcd: Running and Ready, though their processes
// are gone. A stack that comes up again would show that to every waiter (kubectl wait, a
// Deployment's availability, virt-controller) until the node agent gets round to each pod. So the
// stack reports its nodes' shutdown before it stops the control plane, as kubelet's graceful node
// shutdown does: every pod of the node that was not done is Failed, in kubelet's words.
const (
	reasonNodeShutdown         = "Terminated"
	messageNodeShutdown        = "Pod was terminated in response to imminent node shutdown."
	reasonTerminationByKubelet = "TerminationByKubelet"
	// exitKilled is the exit code of a container killed with SIGKILL.
	exitKilled = 137
)

// ReportNodeShutdown marks every pod bound to node that has not ended as Failed by a node
// shutdown. Its processes must be gone (CleanupNode).
func ReportNodeShutdown(ctx context.Context, kube kubernetes.Interface, node string, now metav1.Time) error {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return fmt.Errorf("pods of node %s: %w", node, err)
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		p.Status = ShutdownStatus(p, now)
		if _, err := kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("report shutdown of pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ShutdownStatus is the status of pod once its node shut down: every container that had not
// ended was killed, the pod is Failed with kubelet's reason and message, and a DisruptionTarget
// condition says who ended it.
func ShutdownStatus(pod *corev1.Pod, now metav1.Time) corev1.PodStatus {
	st := ComputeStatus(pod, PodRuntimeStatus{
		InitContainers: killed(pod.Status.InitContainerStatuses, now),
		Containers:     killed(pod.Status.ContainerStatuses, now),
		PodIP:          pod.Status.PodIP,
		HostIP:         pod.Status.HostIP,
		StartTime:      pod.Status.StartTime,
		Terminal:       true,
		Reason:         reasonNodeShutdown,
		Message:        messageNodeShutdown,
	}, now)
	disruption := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reasonTerminationByKubelet, Message: messageNodeShutdown, LastTransitionTime: now}
	if c := findCondition(st.Conditions, corev1.DisruptionTarget); c != nil {
		*c = disruption
	} else {
		st.Conditions = append(st.Conditions, disruption)
	}
	return st
}

// killed turns the statuses of containers that had not ended into SIGKILL exits at now.
func killed(statuses []corev1.ContainerStatus, now metav1.Time) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(statuses))
	for i, s := range statuses {
		s = *s.DeepCopy()
		if s.State.Terminated == nil {
			var started metav1.Time
			if s.State.Running != nil {
				started = s.State.Running.StartedAt
			}
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitKilled, Reason: "Error", Message: messageNodeShutdown, StartedAt: started, FinishedAt: now,
				ContainerID: s.ContainerID,
			}}
		}
		s.Ready = false
		started := false
		s.Started = &started
		out[i] = s
	}
	return out
}
