// Package vmistatus decides what virt-handler writes into a VMI's status: a pure function of the
// VMI, its launcher Pod and what the launcher reports of the domain. From Scheduled on, the phase
// and the domain-related conditions are virt-handler's; the controller only placed the VMI.
package vmistatus

import (
	"encoding/json"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

// Reasons virt-handler puts on the VMI's conditions.
const (
	// ReasonPaused is on Ready=False while the guest's vCPUs are stopped.
	ReasonPaused = "Paused"
	// ReasonPausedByUser is KubeVirt's reason on the Paused condition after a pause request.
	ReasonPausedByUser = "PausedByUser"
	// ReasonGuestNotRunning is on Ready=False once the guest is gone.
	ReasonGuestNotRunning = "GuestNotRunning"
	// ReasonLauncherGone is on Ready=False when the launcher Pod ended without telling how the
	// guest did.
	ReasonLauncherGone = "LauncherGone"
)

// InfoSourceDomain is KubeVirt's infoSource for interfaces known from the domain definition.
const InfoSourceDomain = "domain"

// Final reports whether the phase can never change again.
func Final(p kubevirtv1.VirtualMachineInstancePhase) bool {
	return p == kubevirtv1.Succeeded || p == kubevirtv1.Failed
}

// Handled reports whether virt-handler owns the VMI's status in this phase.
func Handled(p kubevirtv1.VirtualMachineInstancePhase) bool {
	return p == kubevirtv1.Scheduled || p == kubevirtv1.Running
}

// running reports whether the domain's state means the guest exists and QEMU runs it.
func running(s launcherapi.DomainState) bool {
	switch s {
	case launcherapi.StateRunning, launcherapi.StatePaused, launcherapi.StateBlocked:
		return true
	}
	return false
}

// Compute returns the VMI's new status. dom is nil while the launcher has not been reached; pod is
// nil when the launcher Pod is gone.
func Compute(vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, dom *launcherapi.DomainStatus, now time.Time) kubevirtv1.VirtualMachineInstanceStatus {
	st := *vmi.Status.DeepCopy()
	if !Handled(st.Phase) {
		return st
	}
	if dom != nil {
		sourceMigration(vmi, &st, dom, now)
	}
	if movedAway(&st, pod, dom) {
		// The guest runs on the migration's target; its handler takes the VMI over. The source
		// launcher's end says nothing about the guest.
		return st
	}
	switch {
	case dom != nil && dom.Result != nil:
		finish(&st, dom.Result.ExitCode == 0, ReasonGuestNotRunning, "guest "+dom.Result.Reason+resultMessage(dom.Result), now)
	case podEnded(pod) && st.Phase == kubevirtv1.Running:
		// The launcher's report never arrived (virt-handler was away when the guest ended, say):
		// its exit code and termination message tell the same. Without them the Pod's end is all
		// that is known, and a guest that vanished without a clean report did not end well.
		if res := launcherExit(pod); res != nil {
			finish(&st, res.ExitCode == 0, ReasonGuestNotRunning, "guest "+res.Reason+resultMessage(res), now)
		} else {
			finish(&st, false, ReasonLauncherGone, podEndMessage(pod), now)
		}
	case dom != nil && dom.Defined && running(dom.State):
		st.Phase = kubevirtv1.Running
		paused := dom.State == launcherapi.StatePaused
		if paused {
			st.Conditions = vmicond.Set(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue,
				Reason: ReasonPausedByUser, Message: "VMI was paused by user",
			}, now)
			st.Conditions = vmicond.Set(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: ReasonPaused,
				Message: "the guest is paused",
			}, now)
		} else {
			st.Conditions = vmicond.Remove(st.Conditions, kubevirtv1.VirtualMachineInstancePaused)
			st.Conditions = vmicond.Set(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
				Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue,
			}, now)
		}
		st.Conditions = vmicond.Set(st.Conditions, LiveMigratable(vmi), now)
		st.Interfaces = interfaces(vmi, pod, dom)
		guestAgent(&st, dom, metav1.NewTime(now.Truncate(time.Second)))
	}
	return st
}

func finish(st *kubevirtv1.VirtualMachineInstanceStatus, clean bool, reason, msg string, now time.Time) {
	st.Phase = kubevirtv1.Failed
	if clean {
		st.Phase = kubevirtv1.Succeeded
	}
	st.Conditions = vmicond.Remove(st.Conditions, kubevirtv1.VirtualMachineInstancePaused)
	st.Conditions = vmicond.Remove(st.Conditions, kubevirtv1.VirtualMachineInstanceAgentConnected)
	st.Conditions = vmicond.Set(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
	}, now)
}

func resultMessage(r *launcherapi.Result) string {
	if r.Message == "" {
		return ""
	}
	return ": " + r.Message
}

// podEnded reports whether the launcher Pod is gone or its containers are done.
func podEnded(pod *corev1.Pod) bool {
	return pod == nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// launcherExit is the launcher's result as its ended Pod tells it: the compute container's exit
// code, which decides, with the reason and message of the termination message the launcher wrote
// (absent when it was killed). nil when the container did not end.
func launcherExit(pod *corev1.Pod) *launcherapi.Result {
	if pod == nil {
		return nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		term := cs.State.Terminated
		if cs.Name != launcherpod.ComputeContainer || term == nil {
			continue
		}
		res := &launcherapi.Result{}
		if err := json.Unmarshal([]byte(term.Message), res); err != nil || res.Reason == "" {
			res = &launcherapi.Result{Reason: term.Reason, Message: term.Message}
		}
		res.ExitCode = int(term.ExitCode)
		return res
	}
	return nil
}

func podEndMessage(pod *corev1.Pod) string {
	if pod == nil {
		return "virt-launcher pod disappeared while the VMI was running"
	}
	msg := "virt-launcher pod " + string(pod.Status.Phase) + " while the VMI was running"
	if pod.Status.Message != "" {
		msg += ": " + pod.Status.Message
	}
	return msg
}

// interfaces reports the guest NICs in the VMI's interface order. An interface on the pod network
// (masquerade) is reached at the Pod's IPs, so those are its addresses; the pod interface comes
// first, as clients take the first address as the VMI's.
func interfaces(vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, dom *launcherapi.DomainStatus) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	podNetworks := map[string]bool{}
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			podNetworks[n.Name] = true
		}
	}
	reported := map[string]launcherapi.Interface{}
	for _, i := range dom.Interfaces {
		reported[i.Name] = i
	}
	var podIfaces, others []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for _, spec := range vmi.Spec.Domain.Devices.Interfaces {
		got := reported[spec.Name]
		out := kubevirtv1.VirtualMachineInstanceNetworkInterface{
			Name:          spec.Name,
			MAC:           got.MAC,
			InterfaceName: got.InterfaceName,
			IPs:           got.IPs,
			InfoSource:    InfoSourceDomain,
		}
		if spec.MacAddress != "" && out.MAC == "" {
			out.MAC = spec.MacAddress
		}
		if podNetworks[spec.Name] && pod != nil && pod.Status.PodIP != "" {
			out.IPs = nil
			for _, ip := range pod.Status.PodIPs {
				out.IPs = append(out.IPs, ip.IP)
			}
			if len(out.IPs) == 0 {
				out.IPs = []string{pod.Status.PodIP}
			}
			out.PodInterfaceName = "eth0"
		}
		if len(out.IPs) > 0 {
			out.IP = out.IPs[0]
		}
		if podNetworks[spec.Name] {
			podIfaces = append(podIfaces, out)
		} else {
			others = append(others, out)
		}
	}
	return withGuestInterfaces(append(podIfaces, others...), dom.GuestInterfaces, podNetworks)
}

// Annotations are the VMI's annotations with the versions the launcher reports (dom nil, or
// without versions: the VMI's own, unchanged).
func Annotations(vmi *kubevirtv1.VirtualMachineInstance, dom *launcherapi.DomainStatus) map[string]string {
	if dom == nil || dom.Versions == nil {
		return vmi.Annotations
	}
	ann := maps.Clone(vmi.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	for key, v := range map[string]string{launcherapi.AnnotationQEMUVersion: dom.Versions.QEMU, launcherapi.AnnotationLibvirtVersion: dom.Versions.Libvirt} {
		if v != "" {
			ann[key] = v
		}
	}
	return ann
}
