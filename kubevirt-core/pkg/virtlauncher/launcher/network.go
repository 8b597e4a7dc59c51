package launcher

import (
	"context"
	"log/slog"
	"slices"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/network"
)

// setupNetwork binds the VMI's pod network interface (masquerade) in the launcher's network
// namespace, the Pod's, and returns the NIC the converter attaches.
func (m *Manager) setupNetwork(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, log *slog.Logger) ([]converter.TapNIC, error) {
	nic, err := network.PodNIC(vmi)
	if err != nil {
		return nil, invalidVMI(err)
	}
	if nic == nil {
		return nil, nil
	}
	pod, err := network.Setup(ctx, network.Config{
		NIC:        *nic,
		ResolvConf: m.cfg.ResolvConf,
		// Every launcher may become a migration target; KubeVirt keeps these ports out of the
		// guest's forwarding for every VMI alike.
		HostPorts: migrationHostPorts(),
		// A new lease changes the status: let the loop publish it.
		OnLease: m.pokeLoop,
		Logger:  log,
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.podNet, m.podNIC = pod, nic.Name
	m.mu.Unlock()
	return []converter.TapNIC{{Name: nic.Name, Tap: pod.Tap(), MAC: nic.MAC.String()}}, nil
}

// teardownNetwork removes the pod network binding, once the domain is gone.
func (m *Manager) teardownNetwork() {
	m.mu.Lock()
	pod := m.podNet
	m.podNet = nil
	m.mu.Unlock()
	if pod == nil {
		return
	}
	if err := pod.Close(); err != nil {
		m.log.Error("remove the pod network binding", "err", err)
	}
}

// withGuestIPs adds the address the guest leased to its pod network interface. Called with mu
// held.
func (m *Manager) withGuestIPs(ifaces []launcherapi.Interface) []launcherapi.Interface {
	if m.podNet == nil {
		return ifaces
	}
	ips := m.podNet.GuestIPs()
	if len(ips) == 0 {
		return ifaces
	}
	// A copy: the loop's slice is shared by every status published so far.
	out := slices.Clone(ifaces)
	for i := range out {
		if out[i].Name == m.podNIC {
			out[i].IPs = ips
		}
	}
	return out
}
