package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// Start prepares the VMI's volumes and starts its domain. Starting the VMI that already runs (or
// ran) does nothing; another VMI is refused.
func (m *Manager) Start(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	if vmi == nil {
		return invalidVMI(errors.New("no VMI"))
	}
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.mu.Lock()
	running, finished := m.vmi, m.result != nil
	m.mu.Unlock()
	if running != nil {
		if running.UID != vmi.UID {
			return invalidVMI(fmt.Errorf("this launcher runs VMI %s/%s (uid %s), not %s/%s (uid %s)",
				running.Namespace, running.Name, running.UID, vmi.Namespace, vmi.Name, vmi.UID))
		}
		// The domain runs: a later Sync may only bring hotplugged volumes.
		return m.syncHotplug(ctx, vmi)
	}
	if finished {
		// Stopped before it started: the Pod is on its way out and must not start a guest now.
		return nil
	}
	vmi = vmi.DeepCopy()
	log := m.log.With("vmi", vmi.Namespace+"/"+vmi.Name)
	dom, name, err := m.create(ctx, vmi, log)
	if err != nil {
		return err
	}
	xml, err := dom.GetXMLDesc(0)
	if err != nil {
		log.Warn("read the running domain's XML", "err", err)
	}
	ifaces, agent, err := domainDevices(xml)
	if err != nil {
		log.Warn("read devices from the domain XML", "err", err)
	}
	m.mu.Lock()
	m.vmi, m.dom = vmi, dom
	m.agent = m.agent || agent
	m.mu.Unlock()

	st := &loopState{name: name, ifaces: ifaces, log: log}
	// Publish before returning, so that the caller (Sync) sees the domain it just started.
	m.refresh(dom, st)
	go m.loop(dom, st)
	return nil
}

// create prepares the volumes, converts the VMI, subscribes to the domain's events and starts it.
func (m *Manager) create(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, log *slog.Logger) (*libvirt.Domain, string, error) {
	state := m.cfg.StateDir
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, "", fmt.Errorf("state dir: %w", err)
	}
	// Sockets of an earlier run would make QEMU fail to bind.
	for _, p := range []string{ConsoleSocket(state), VNCSocket(state)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("remove stale socket: %w", err)
		}
	}
	paths, err := prepareVolumes(ctx, m.cfg, m.cdisks, vmi, true, log)
	if err != nil {
		return nil, "", err
	}
	emulation := m.cfg.Emulation
	if _, err := os.Stat("/dev/kvm"); err != nil {
		emulation = true
	}
	nics, err := m.setupNetwork(ctx, vmi, log)
	if err != nil {
		return nil, "", err
	}
	started := false
	defer func() {
		// The binding exists for the domain alone; without one, the next Sync starts afresh.
		if !started {
			m.teardownNetwork()
		}
	}()
	spec, err := converter.Domain(vmi, converter.ConverterContext{
		Emulation:    emulation,
		VolumePaths:  paths,
		SerialSocket: ConsoleSocket(state),
		SerialLog:    SerialLog(state),
		VNCSocket:    VNCSocket(state),
		TapNICs:      nics,
	})
	if err != nil {
		return nil, "", invalidVMI(fmt.Errorf("convert VMI: %w", err))
	}
	xml, err := spec.Marshal()
	if err != nil {
		return nil, "", fmt.Errorf("marshal domain: %w", err)
	}
	name := spec.Name
	if err := m.subscribe(name); err != nil {
		return nil, "", err
	}

	// A domain of the same name is left over from an earlier launcher of this VMI that died; the
	// new one owns the VMI now.
	if old, err := m.conn.LookupDomainByName(name); err == nil {
		log.Warn("destroying a leftover domain", "domain", name)
		err := old.Destroy()
		old.Free()
		if err != nil && !isNoDomain(err) {
			m.unsubscribe()
			return nil, "", fmt.Errorf("destroy leftover domain %s: %w", name, err)
		}
	}
	dom, err := m.conn.DomainCreateXML(xml, startFlags(vmi))
	if err != nil {
		m.unsubscribe()
		return nil, "", fmt.Errorf("start domain %s: %w", name, err)
	}
	started = true
	log.Info("domain started", "domain", name, "emulation", emulation, "paused", vmi.ShouldStartPaused(), "console", ConsoleSocket(state))
	return dom, name, nil
}

// startFlags creates the domain with its vCPUs stopped when the VMI's startStrategy is Paused, as
// KubeVirt does: the guest runs once it is unpaused. libvirt reports such a domain paused by the
// user, so virt-handler shows the Paused condition as after a pause.
func startFlags(vmi *kubevirtv1.VirtualMachineInstance) libvirt.DomainCreateFlags {
	if vmi.ShouldStartPaused() {
		return libvirt.DOMAIN_START_PAUSED
	}
	return libvirt.DOMAIN_NONE
}

// subscribe registers for the lifecycle and guest-agent events of domain name. Registration is
// for all domains and filters by name, so that it can happen before the domain exists and no
// event is missed.
func (m *Manager) subscribe(name string) error {
	ours := func(d *libvirt.Domain) bool {
		n, err := d.GetName()
		return err == nil && n == name
	}
	lc, err := m.conn.DomainEventLifecycleRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
		if !ours(d) {
			return
		}
		select {
		case m.events <- *ev:
		default:
			// The loop also polls, and STOPPED (the one event that matters) comes last, after
			// the loop has drained the others.
		}
	})
	if err != nil {
		return fmt.Errorf("register for domain events: %w", err)
	}
	ag, err := m.conn.DomainEventAgentLifecycleRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventAgentLifecycle) {
		if !ours(d) {
			return
		}
		m.mu.Lock()
		m.agent = ev.State == libvirt.CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED
		m.kickAgentPoller()
		m.mu.Unlock()
		m.pokeLoop()
	})
	if err != nil {
		m.conn.DomainEventDeregister(lc)
		return fmt.Errorf("register for guest agent events: %w", err)
	}
	m.mu.Lock()
	m.callbacks = []int{lc, ag}
	m.mu.Unlock()
	return nil
}

func (m *Manager) unsubscribe() {
	m.mu.Lock()
	ids := m.callbacks
	m.callbacks = nil
	m.mu.Unlock()
	for _, id := range ids {
		if err := m.conn.DomainEventDeregister(id); err != nil {
			m.log.Debug("deregister domain events", "err", err)
		}
	}
}
