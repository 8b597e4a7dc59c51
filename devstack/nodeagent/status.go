package nodeagent

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons, as kubelet words them.
const (
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
)

// ownedConditions are the pod conditions the node writes. Every other condition in a pod's
// status (readiness gates, DisruptionTarget, ...) belongs to someone else and is carried over.
var ownedConditions = map[corev1.PodConditionType]bool{
	corev1.PodReadyToStartContainers: true,
	corev1.PodInitialized:            true,
	corev1.PodReady:                  true,
	corev1.ContainersReady:           true,
	corev1.PodScheduled:              true,
}

// PodRuntimeStatus is what the node knows about a pod's processes.
type PodRuntimeStatus struct {
	InitContainers []corev1.ContainerStatus
	Containers     []corev1.ContainerStatus
	PodIP          string
	HostIP         string
	StartTime      *metav1.Time
	// SandboxReady tells that the pod's network namespace exists.
	SandboxReady bool
	// Terminal marks a pod whose processes are all gone for good (deleted, or lost): its phase is
	// Succeeded if every container succeeded and Failed otherwise.
	Terminal bool
	// Reason and Message explain a pod-level failure, such as processes lost across a restart;
	// they make the pod Failed.
	Reason, Message string
}

// ComputeStatus builds a pod's status from the node's view of it. current is the pod as the API
// has it: conditions the node does not own (readiness gates among them) are kept from its status,
// and the Ready condition honours the readiness gates in its spec.
func ComputeStatus(current *corev1.Pod, rt PodRuntimeStatus, now metav1.Time) corev1.PodStatus {
	st := *current.Status.DeepCopy()
	spec := &current.Spec
	st.InitContainerStatuses = rt.InitContainers
	st.ContainerStatuses = rt.Containers
	st.HostIP = rt.HostIP
	st.HostIPs = nil
	if rt.HostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: rt.HostIP}}
	}
	st.PodIP = rt.PodIP
	st.PodIPs = nil
	if rt.PodIP != "" {
		st.PodIPs = []corev1.PodIP{{IP: rt.PodIP}}
	}
	st.StartTime = rt.StartTime
	st.ObservedGeneration = current.Generation

	st.Phase = PodPhase(spec, rt.InitContainers, rt.Containers, rt.Terminal)
	st.Reason, st.Message = "", ""
	if rt.Message != "" || rt.Reason != "" {
		st.Phase = corev1.PodFailed
		st.Reason, st.Message = rt.Reason, rt.Message
	}

	sandbox := corev1.ConditionFalse
	if rt.SandboxReady {
		sandbox = corev1.ConditionTrue
	}
	conds := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: sandbox},
		initializedCondition(spec, rt.InitContainers, st.Phase),
	}
	containersReady := containersReadyCondition(spec, rt.Containers, st.Phase)
	conds = append(conds,
		readyCondition(spec, current.Status.Conditions, containersReady),
		containersReady,
		corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	)
	for i := range conds {
		conds[i].ObservedGeneration = current.Generation
		conds[i].LastTransitionTime = now
		if old := findCondition(current.Status.Conditions, conds[i].Type); old != nil && old.Status == conds[i].Status {
			conds[i].LastTransitionTime = old.LastTransitionTime
		}
		conds[i].LastProbeTime = metav1.Time{}
	}
	for _, c := range current.Status.Conditions {
		if !ownedConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
	return st
}

// MergeForeignConditions carries the conditions the node does not own over from live (the pod as
// the API has it right now) into st, and re-evaluates Ready against the readiness gates. It is what
// makes a status write never drop a condition another controller wrote in the meantime.
func MergeForeignConditions(spec *corev1.PodSpec, st *corev1.PodStatus, live []corev1.PodCondition, now metav1.Time) {
	var conds []corev1.PodCondition
	for _, c := range st.Conditions {
		if ownedConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	for _, c := range live {
		if !ownedConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
	cr := findCondition(conds, corev1.ContainersReady)
	ready := findCondition(conds, corev1.PodReady)
	if cr == nil || ready == nil {
		return
	}
	want := readyCondition(spec, conds, *cr)
	if want.Status != ready.Status {
		ready.LastTransitionTime = now
	}
	ready.Status, ready.Reason, ready.Message = want.Status, want.Reason, want.Message
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func findStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// PodPhase is kubelet's phase rule over container statuses. terminal marks a pod whose containers
// will never run again (deleted or lost).
func PodPhase(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, terminal bool) corev1.PodPhase {
	pendingInit, failedInit := 0, 0
	for _, c := range spec.InitContainers {
		s := findStatus(initStatuses, c.Name)
		switch {
		case s == nil:
			pendingInit++
		case s.State.Running != nil:
			pendingInit++
		case s.State.Terminated != nil:
			if s.State.Terminated.ExitCode != 0 {
				pendingInit++
				failedInit++
			}
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
			if s.LastTerminationState.Terminated.ExitCode != 0 {
				pendingInit++
				failedInit++
			}
		default:
			pendingInit++
		}
	}
	running, waiting, stopped, succeeded, unknown := 0, 0, 0, 0, 0
	for _, c := range spec.Containers {
		s := findStatus(statuses, c.Name)
		switch {
		case s == nil:
			unknown++
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInit > 0 && (spec.RestartPolicy == corev1.RestartPolicyNever || terminal) {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0:
		if terminal {
			return corev1.PodFailed
		}
		return corev1.PodPending
	case waiting > 0:
		if terminal {
			return corev1.PodFailed
		}
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped == len(spec.Containers) && unknown == 0:
		if terminal {
			if succeeded == len(spec.Containers) {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if spec.RestartPolicy == corev1.RestartPolicyAlways {
			return corev1.PodRunning // every container is about to restart
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		if spec.RestartPolicy == corev1.RestartPolicyNever {
			return corev1.PodFailed
		}
		return corev1.PodRunning // OnFailure: the failed ones restart
	case terminal:
		return corev1.PodFailed
	}
	return corev1.PodPending
}

func initializedCondition(spec *corev1.PodSpec, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	var unknown, incomplete []string
	for _, c := range spec.InitContainers {
		s := findStatus(statuses, c.Name)
		switch {
		case s == nil:
			unknown = append(unknown, c.Name)
		case !initDone(s):
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Reason: reasonPodCompleted}
	}
	if msg := containersMessage(unknown, "incomplete", incomplete); msg != "" {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse,
			Reason: reasonContainersNotInitialized, Message: msg}
	}
	return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
}

// containersMessage is kubelet's message for containers holding a condition back: those with
// unknown status, then those whose status is state; empty when there are none.
func containersMessage(unknown []string, state string, others []string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(others) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", state, others))
	}
	return strings.Join(msgs, ", ")
}

// initDone tells an init container that has run to success.
func initDone(s *corev1.ContainerStatus) bool {
	if t := s.State.Terminated; t != nil {
		return t.ExitCode == 0
	}
	return false
}

func containersReadyCondition(spec *corev1.PodSpec, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	var unknown, unready []string
	for _, c := range spec.Containers {
		s := findStatus(statuses, c.Name)
		switch {
		case s == nil:
			unknown = append(unknown, c.Name)
		case !s.Ready:
			unready = append(unready, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: reasonPodCompleted}
	}
	if phase == corev1.PodFailed {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: reasonPodFailed}
	}
	if msg := containersMessage(unknown, "unready", unready); msg != "" {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse,
			Reason: reasonContainersNotReady, Message: msg}
	}
	return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
}

// readyCondition is ContainersReady, further held back by every readiness gate whose condition
// (written by another controller into conds) is missing or not True.
func readyCondition(spec *corev1.PodSpec, conds []corev1.PodCondition, containersReady corev1.PodCondition) corev1.PodCondition {
	if containersReady.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: containersReady.Status,
			Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var msgs []string
	for _, g := range spec.ReadinessGates {
		c := findCondition(conds, g.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case c.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, c.Status))
		}
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: reasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// gateConditions is the part of a pod's status its readiness depends on besides the node's own
// view: the conditions of its readiness gates. A change there means the status must be written
// again.
func gateConditions(pod *corev1.Pod) string {
	var b strings.Builder
	for _, g := range pod.Spec.ReadinessGates {
		status := "-"
		if c := findCondition(pod.Status.Conditions, g.ConditionType); c != nil {
			status = string(c.Status)
		}
		fmt.Fprintf(&b, "%s=%s;", g.ConditionType, status)
	}
	return b.String()
}
