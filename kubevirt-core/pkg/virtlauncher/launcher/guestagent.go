package launcher

import (
	"log/slog"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/guestagent"
)

// startAgentPoller polls the guest agent of dom for as long as the domain loop runs; the returned
// function stops it. Its findings reach the status through the loop.
func (m *Manager) startAgentPoller(dom *libvirt.Domain, log *slog.Logger) (stop func()) {
	p := guestagent.New(dom, m.agentConnected, m.pokeLoop, log.With("component", "guest-agent"))
	m.mu.Lock()
	m.agentPoller = p
	m.mu.Unlock()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		p.Run(quit)
	}()
	return func() {
		close(quit)
		// The domain handle is freed after the loop: no agent command may still use it.
		<-done
		m.mu.Lock()
		m.agentPoller = nil
		m.mu.Unlock()
	}
}

// kickAgentPoller makes the poller follow a connect or disconnect of the agent at once. Called with
// mu held.
func (m *Manager) kickAgentPoller() {
	if m.agentPoller != nil {
		m.agentPoller.Kick()
	}
}

// withGuestAgent adds what the agent reported to s. Called with mu held.
func (m *Manager) withGuestAgent(s *launcherapi.DomainStatus) {
	if m.agentPoller == nil || !m.agent {
		return
	}
	last := m.agentPoller.Last()
	if os := last.Info.OS; os != (kubevirtv1.VirtualMachineInstanceGuestOSInfo{}) {
		s.GuestOSInfo = &os
	}
	s.Hostname = last.Info.Hostname
	s.GuestInterfaces = last.Interfaces
}

// GuestInfo is what the guest agent last reported, as KubeVirt's guestosinfo subresource shows it.
func (m *Manager) GuestInfo() (*kubevirtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	if _, err := m.domain(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.agent || m.agentPoller == nil {
		return nil, ErrNoGuestAgent
	}
	last := m.agentPoller.Last()
	info := last.Info.DeepCopy()
	if m.frozen {
		info.FSFreezeStatus = "frozen"
	}
	return info, nil
}
