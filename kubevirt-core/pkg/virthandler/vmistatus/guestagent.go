package vmistatus

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

// Interface info sources besides InfoSourceDomain, as KubeVirt names them.
const (
	InfoSourceGuestAgent  = "guest-agent"
	InfoSourceDomainAndGA = InfoSourceDomain + ", " + InfoSourceGuestAgent
)

// guestAgent applies what the launcher reports of the guest agent, with KubeVirt's semantics:
// AgentConnected is present (True, probed when it appeared) while the agent's channel is
// connected and absent otherwise; guestOSInfo is the agent's latest report and stays when the
// agent goes away.
func guestAgent(st *kubevirtv1.VirtualMachineInstanceStatus, dom *launcherapi.DomainStatus, now metav1.Time) {
	switch {
	case !dom.GuestAgentConnected:
		st.Conditions = vmicond.Remove(st.Conditions, kubevirtv1.VirtualMachineInstanceAgentConnected)
	case vmicond.Get(st.Conditions, kubevirtv1.VirtualMachineInstanceAgentConnected) == nil:
		st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
			Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue, LastProbeTime: now,
		})
	}
	if dom.GuestOSInfo != nil {
		st.GuestOSInfo = *dom.GuestOSInfo
	}
}

// withGuestInterfaces merges the agent's view of the NICs into the domain's, as KubeVirt does: a
// NIC the agent reports with a domain NIC's MAC gets the guest's device name and, off the pod
// network (where the Pod's IPs are what clients reach), the guest's addresses; NICs only the
// agent knows (a bridge, a VPN in the guest) follow with InfoSourceGuestAgent.
func withGuestInterfaces(ifaces []kubevirtv1.VirtualMachineInstanceNetworkInterface, guest []launcherapi.GuestInterface, podNetworks map[string]bool) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	if len(guest) == 0 {
		return ifaces
	}
	byMAC := map[string]int{}
	for i, iface := range ifaces {
		if iface.MAC != "" {
			byMAC[strings.ToLower(iface.MAC)] = i
		}
	}
	for _, g := range guest {
		i, ok := byMAC[strings.ToLower(g.MAC)]
		if !ok {
			out := kubevirtv1.VirtualMachineInstanceNetworkInterface{
				MAC: g.MAC, InterfaceName: g.InterfaceName, IPs: g.IPs, InfoSource: InfoSourceGuestAgent,
			}
			if len(g.IPs) > 0 {
				out.IP = g.IPs[0]
			}
			ifaces = append(ifaces, out)
			continue
		}
		iface := &ifaces[i]
		iface.InterfaceName = g.InterfaceName
		iface.InfoSource = InfoSourceDomainAndGA
		if !podNetworks[iface.Name] && len(g.IPs) > 0 {
			iface.IPs = g.IPs
			iface.IP = g.IPs[0]
		}
	}
	return ifaces
}
