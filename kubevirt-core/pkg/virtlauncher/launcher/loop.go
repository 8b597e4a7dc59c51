package launcher

import (
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

type reqKind int

const (
	reqShutdown reqKind = iota
	reqKill
)

// request is a stop command for the domain loop, which owns the stop's state.
type request struct {
	kind  reqKind
	grace time.Duration
	reply chan error
}

// loopState is what the domain loop keeps between events.
type loopState struct {
	name   string
	ifaces []launcherapi.Interface
	log    *slog.Logger
	intent stopIntent
	// QEMU reports a SHUTDOWN before it exits; its detail tells a guest poweroff from a signal
	// sent to QEMU from outside (which also ends in STOPPED_SHUTDOWN).
	hostShutdown bool
	grace        *time.Timer
	deadline     time.Time
}

// loop follows the domain until it stops: it publishes each state change, carries out stop
// requests and, when the domain is gone, records the Result.
func (m *Manager) loop(dom *libvirt.Domain, st *loopState) {
	log := st.log
	// A safety net in case libvirt drops an event: poll the state now and then.
	poll := time.NewTicker(5 * time.Second)
	defer poll.Stop()
	defer m.startAgentPoller(dom, log)()
	defer func() {
		if st.grace != nil {
			st.grace.Stop()
		}
	}()
	var graceC <-chan time.Time
	for {
		select {
		case r := <-m.reqs:
			r.reply <- m.handle(dom, st, r)
			if st.grace != nil {
				graceC = st.grace.C
			}

		case <-graceC:
			graceC = nil
			log.Warn("guest did not power off within the grace period; destroying")
			st.intent.graceExpired = true
			if err := dom.Destroy(); err != nil && !isNoDomain(err) {
				log.Error("destroy domain", "err", err)
			}

		case ev := <-m.events:
			log.Debug("domain event", "event", ev.String(), "code", int(ev.Event), "detail", ev.Detail)
			switch ev.Event {
			case libvirt.DOMAIN_EVENT_SHUTDOWN:
				st.hostShutdown = libvirt.DomainEventShutdownDetailType(ev.Detail) == libvirt.DOMAIN_EVENT_SHUTDOWN_HOST
			case libvirt.DOMAIN_EVENT_STOPPED:
				m.stopped(st, libvirt.DomainEventStoppedDetailType(ev.Detail))
				return
			case libvirt.DOMAIN_EVENT_CRASHED:
				// on_crash=destroy follows; the STOPPED event then carries CRASHED.
				log.Warn("guest crashed")
			}
			m.refresh(dom, st)

		case <-m.poke:
			m.refresh(dom, st)

		case <-poll.C:
			if m.refresh(dom, st) {
				continue
			}
			// The domain is gone. Give a late STOPPED event a moment before concluding without it.
			select {
			case ev := <-m.events:
				if ev.Event == libvirt.DOMAIN_EVENT_STOPPED {
					m.stopped(st, libvirt.DomainEventStoppedDetailType(ev.Detail))
					return
				}
			case <-time.After(2 * time.Second):
			}
			res := Result{Reason: ReasonCrashed, Message: "domain disappeared without a lifecycle event", ExitCode: ExitCrashed}
			switch {
			case m.migrationCompleted():
				res = m.migratedResult()
			case st.intent.stopping || st.intent.killed:
				res = Result{Reason: ReasonDestroyed, Message: "domain gone after a stop request", ExitCode: ExitStopped}
			}
			m.stoppedWith(st, res, reasonUnknown)
			return

		case <-m.quit:
			return

		case reason := <-m.connClosed:
			err := fmt.Errorf("lost the connection to libvirt (reason %d); the guest's fate is unknown", reason)
			log.Error("domain loop", "err", err)
			m.finish(Result{Reason: ReasonError, Message: err.Error(), ExitCode: ExitError}, nil)
			return
		}
	}
}

// handle carries out a stop request.
func (m *Manager) handle(dom *libvirt.Domain, st *loopState, r request) error {
	log := st.log
	switch r.kind {
	case reqKill:
		st.intent.killed = true
		log.Info("killing the domain on request")
		if err := dom.Destroy(); err != nil && !isNoDomain(err) {
			return fmt.Errorf("kill: %w", err)
		}
		return nil
	case reqShutdown:
		deadline := time.Now().Add(r.grace)
		if st.intent.stopping {
			// Already stopping: a shorter grace period may tighten the deadline, never extend it.
			if deadline.Before(st.deadline) {
				st.deadline = deadline
				st.grace.Reset(r.grace)
			}
			return nil
		}
		st.intent.stopping = true
		st.deadline = deadline
		log.Info("stopping the guest: ACPI power button", "grace", r.grace)
		if err := dom.ShutdownFlags(libvirt.DOMAIN_SHUTDOWN_ACPI_POWER_BTN); err != nil && !isNoDomain(err) {
			// A paused guest cannot take ACPI events; it has to be destroyed.
			log.Warn("ACPI shutdown failed; destroying", "err", err)
			st.grace = time.NewTimer(0)
			return nil
		}
		st.grace = time.NewTimer(r.grace)
		return nil
	}
	return fmt.Errorf("unknown request %d", r.kind)
}

// stopped records the end of the domain as the STOPPED event tells it.
func (m *Manager) stopped(st *loopState, detail libvirt.DomainEventStoppedDetailType) {
	if detail == libvirt.DOMAIN_EVENT_STOPPED_MIGRATED {
		// The guest lives on in the target; the final status must say so, whichever of this
		// event and the migration call's return comes first.
		m.migratedOut()
	}
	m.stoppedWith(st, m.classify(detail, st), lookup(stoppedReasons, detail))
}

func (m *Manager) stoppedWith(st *loopState, res Result, reason string) {
	st.log.Info("domain stopped", "reason", res.Reason, "message", res.Message, "exitCode", res.ExitCode)
	last := m.status(st)
	last.State, last.Reason = launcherapi.StateShutoff, reason
	m.finish(res, &last)
}

// status is the domain's status apart from its state.
func (m *Manager) status(st *loopState) launcherapi.DomainStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	versions := m.versions
	s := launcherapi.DomainStatus{
		Defined:             true,
		Interfaces:          m.withGuestIPs(st.ifaces),
		GuestAgentConnected: m.agent,
		Frozen:              m.frozen,
		Migration:           m.migrationStatus(),
		HotplugVolumes:      m.hotplugStatus(),
		HotplugFailures:     m.hotplugFailures(),
		Versions:            &versions,
	}
	m.withGuestAgent(&s)
	return s
}

// refresh reads the domain's state and publishes the status if it changed. It returns false when
// the domain no longer exists.
func (m *Manager) refresh(dom *libvirt.Domain, st *loopState) bool {
	state, reason, err := dom.GetState()
	if err != nil {
		if isNoDomain(err) {
			return false
		}
		st.log.Warn("read domain state", "err", err)
		return true
	}
	s := m.status(st)
	s.State, s.Reason = domainState(state, reason)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.result == nil && !reflect.DeepEqual(s, m.feed.Current()) {
		st.log.Debug("domain status", "state", s.State, "reason", s.Reason)
		m.feed.Publish(s)
	}
	return true
}
