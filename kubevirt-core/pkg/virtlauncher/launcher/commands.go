package launcher

import (
	"errors"
	"fmt"
	"time"

	"libvirt.org/go/libvirt"
)

// Shutdown presses the guest's ACPI power button and destroys the domain if it still runs after
// grace. Before the domain started, it ends the launcher at once: the VMI is no longer wanted.
func (m *Manager) Shutdown(grace time.Duration) error {
	return m.stop(request{kind: reqShutdown, grace: grace})
}

// Kill destroys the domain at once.
func (m *Manager) Kill() error { return m.stop(request{kind: reqKill}) }

func (m *Manager) stop(r request) error {
	m.startMu.Lock()
	started := m.Started()
	if !started {
		m.finish(Result{Reason: ReasonDestroyed, Message: "stopped before the guest was started", ExitCode: ExitStopped}, nil)
	}
	m.startMu.Unlock()
	if !started {
		return nil
	}
	r.reply = make(chan error, 1)
	select {
	case m.reqs <- r:
	case <-m.done:
		return nil // already gone: what was asked for
	}
	select {
	case err := <-r.reply:
		return err
	case <-m.done:
		return nil
	}
}

// Abandon ends a launcher whose domain never started, with res (a failed start, or no VMI in
// time). It returns false, doing nothing, once a domain runs.
func (m *Manager) Abandon(res Result) bool {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	if m.Started() || m.awaitingIncoming() {
		// A target waits for its guest as long as the migration takes; whoever started the
		// migration ends the launcher if it fails.
		return false
	}
	m.finish(res, nil)
	return true
}

// domain returns the running domain, or why there is none.
func (m *Manager) domain() (*libvirt.Domain, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.result != nil:
		return nil, ErrFinished
	case m.dom == nil:
		return nil, ErrNotStarted
	}
	return m.dom, nil
}

// command runs fn on the running domain and lets the loop publish what changed. A domain that
// vanished meanwhile is reported as ErrFinished.
func (m *Manager) command(what string, fn func(*libvirt.Domain, libvirt.DomainState) error) error {
	dom, err := m.domain()
	if err != nil {
		return err
	}
	state, _, err := dom.GetState()
	if err == nil {
		err = fn(dom, state)
	}
	m.pokeLoop()
	switch {
	case err == nil:
		return nil
	case isNoDomain(err):
		return ErrFinished
	case errors.Is(err, ErrPaused), errors.Is(err, ErrNoGuestAgent):
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Pause stops the guest's vCPUs.
func (m *Manager) Pause() error {
	return m.command("pause", func(dom *libvirt.Domain, state libvirt.DomainState) error {
		if state == libvirt.DOMAIN_PAUSED {
			return nil
		}
		return dom.Suspend()
	})
}

// Unpause resumes the guest's vCPUs.
func (m *Manager) Unpause() error {
	return m.command("unpause", func(dom *libvirt.Domain, state libvirt.DomainState) error {
		if state != libvirt.DOMAIN_PAUSED {
			return nil
		}
		return dom.Resume()
	})
}

// SoftReboot asks the guest to reboot: through the guest agent when it runs, else with the ACPI
// power button, which libvirt turns into a reboot (the guest powers off, libvirt resets QEMU and
// lets it run again instead of ending it).
func (m *Manager) SoftReboot() error {
	return m.command("soft reboot", func(dom *libvirt.Domain, state libvirt.DomainState) error {
		if state == libvirt.DOMAIN_PAUSED {
			return ErrPaused
		}
		flags := libvirt.DOMAIN_REBOOT_ACPI_POWER_BTN
		if m.agentConnected() {
			flags = libvirt.DOMAIN_REBOOT_GUEST_AGENT
		}
		return dom.Reboot(flags)
	})
}

// Reset resets the guest at once, without asking it (QEMU's system_reset through libvirt): the
// same domain and QEMU go on, the guest boots again. A paused guest is refused, as for a soft
// reboot: the reset would only show once it runs again.
func (m *Manager) Reset() error {
	return m.command("reset", func(dom *libvirt.Domain, state libvirt.DomainState) error {
		if state == libvirt.DOMAIN_PAUSED {
			return ErrPaused
		}
		return dom.Reset(0)
	})
}

// Freeze freezes the guest's filesystems through the guest agent.
func (m *Manager) Freeze() error {
	return m.command("freeze", func(dom *libvirt.Domain, _ libvirt.DomainState) error {
		m.mu.Lock()
		agent, frozen := m.agent, m.frozen
		m.mu.Unlock()
		switch {
		case frozen:
			return nil
		case !agent:
			return ErrNoGuestAgent
		}
		if err := dom.FSFreeze(nil, 0); err != nil {
			return err
		}
		m.setFrozen(true)
		return nil
	})
}

// Unfreeze thaws what Freeze froze.
func (m *Manager) Unfreeze() error {
	return m.command("unfreeze", func(dom *libvirt.Domain, _ libvirt.DomainState) error {
		m.mu.Lock()
		agent, frozen := m.agent, m.frozen
		m.mu.Unlock()
		switch {
		case !frozen:
			return nil
		case !agent:
			return ErrNoGuestAgent
		}
		if err := dom.FSThaw(nil, 0); err != nil {
			return err
		}
		m.setFrozen(false)
		return nil
	})
}

func (m *Manager) agentConnected() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agent
}

func (m *Manager) setFrozen(v bool) {
	m.mu.Lock()
	m.frozen = v
	m.mu.Unlock()
}
