package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// PrepareIncoming makes the launcher a migration target for vmi: it prepares the volumes and the
// pod network as Start does, subscribes to the domain's events and opens its libvirtd to the
// source. The guest arrives through libvirt; the launcher then runs it as if it had started it.
// Preparing again for the same migration does nothing.
func (m *Manager) PrepareIncoming(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, uid string) error {
	if vmi == nil {
		return invalidVMI(errors.New("no VMI"))
	}
	if uid == "" {
		return invalidVMI(errors.New("no migration UID"))
	}
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.mu.Lock()
	cur, finished, mig := m.vmi, m.result != nil, m.mig
	m.mu.Unlock()
	switch {
	case finished:
		return ErrFinished
	case mig != nil && mig.status.Role == launcherapi.MigrationRoleTarget && mig.status.UID == uid:
		return nil
	case mig != nil:
		return fmt.Errorf("%w (%s)", ErrMigrationInProgress, mig.status.UID)
	case cur != nil:
		return ErrAlreadyRunning
	}
	vmi = vmi.DeepCopy()
	log := m.log.With("vmi", vmi.Namespace+"/"+vmi.Name, "migration", uid)
	name, proxy, err := m.prepareTarget(ctx, vmi, log)
	if err != nil {
		return err
	}
	ports := launcherapi.DefaultMigrationPorts
	m.mu.Lock()
	m.vmi = vmi
	m.mig = &migration{
		status: launcherapi.MigrationStatus{Role: launcherapi.MigrationRoleTarget, UID: uid, TargetReady: true, Ports: &ports},
		proxy:  proxy,
	}
	m.mu.Unlock()
	m.publishMigration()
	log.Info("ready to receive the guest", "libvirtPort", ports.Libvirt, "migrationPort", ports.Migration, "blockPort", ports.Block)
	go m.awaitIncoming(name, log)
	return nil
}

// prepareTarget is create without the domain: the state directory, the volumes (the disk
// overlays the source fills), the pod network (the tap the guest's NIC comes back on), the event
// subscription, and the proxy to libvirtd.
func (m *Manager) prepareTarget(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, log *slog.Logger) (string, *tcpProxy, error) {
	state := m.cfg.StateDir
	if err := os.MkdirAll(state, 0o755); err != nil {
		return "", nil, fmt.Errorf("state dir: %w", err)
	}
	// The incoming QEMU binds the console and VNC sockets at the same paths as the source's.
	for _, p := range []string{ConsoleSocket(state), VNCSocket(state)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	if _, err := prepareVolumes(ctx, m.cfg, m.cdisks, vmi, false, log); err != nil {
		return "", nil, err
	}
	if _, err := m.setupNetwork(ctx, vmi, log); err != nil {
		return "", nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.teardownNetwork()
		}
	}()
	name := converter.DomainName(vmi)
	if err := m.subscribe(name); err != nil {
		return "", nil, err
	}
	if old, err := m.conn.LookupDomainByName(name); err == nil {
		// Left by an earlier attempt of this launcher: libvirt would refuse the incoming one.
		log.Warn("destroying a leftover domain before the migration", "domain", name)
		err := old.Destroy()
		old.Free()
		if err != nil && !isNoDomain(err) {
			m.unsubscribe()
			return "", nil, fmt.Errorf("destroy leftover domain %s: %w", name, err)
		}
	}
	proxy, err := listenProxy(fmt.Sprintf(":%d", launcherapi.LibvirtConnectionPort), libvirtSocket(m.cfg.LibvirtURI), log)
	if err != nil {
		m.unsubscribe()
		return "", nil, fmt.Errorf("open libvirtd to the migration source: %w", err)
	}
	ok = true
	return name, proxy, nil
}

// libvirtSocket is the unix socket of the libvirtd at uri: its socket parameter, else the system
// daemon's.
func libvirtSocket(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if s := u.Query().Get("socket"); s != "" {
			return s
		}
	}
	return "/run/libvirt/libvirt-sock"
}

// awaitIncoming watches for the migrated guest and adopts it once it runs on this side. A failed
// attempt leaves nothing behind in libvirt, and the launcher keeps waiting: the migration
// controller removes a target whose migration failed.
func (m *Manager) awaitIncoming(name string, log *slog.Logger) {
	poll := time.NewTicker(incomingPoll)
	defer poll.Stop()
	for {
		select {
		case ev := <-m.events:
			log.Debug("incoming domain event", "event", ev.String())
			if ev.Event == libvirt.DOMAIN_EVENT_STOPPED {
				log.Warn("an incoming migration of the guest failed", "detail", ev.Detail)
				m.mu.Lock()
				if m.mig != nil {
					m.mig.status.Message = "an incoming migration attempt failed"
				}
				m.mu.Unlock()
				m.publishMigration()
			}
		case <-poll.C:
		case <-m.poke:
		case <-m.quit:
			return
		case <-m.done:
			return
		case reason := <-m.connClosed:
			err := fmt.Errorf("lost the connection to libvirt (reason %d) while waiting for the migrated guest", reason)
			log.Error("incoming migration", "err", err)
			m.finish(Result{Reason: ReasonError, Message: err.Error(), ExitCode: ExitError}, nil)
			return
		}
		dom, err := m.conn.LookupDomainByName(name)
		if err != nil {
			continue // not there yet
		}
		state, reason, err := dom.GetState()
		if err != nil || !landed(state, reason) {
			dom.Free()
			continue
		}
		m.adopt(dom, name, log)
		return
	}
}

// landed reports whether an incoming domain's state means the migration finished: the guest runs
// here (or stays paused, as it was on the source). While the stream comes in it is paused for
// the migration.
func landed(state libvirt.DomainState, reason int) bool {
	switch state {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		return true
	case libvirt.DOMAIN_PAUSED:
		return libvirt.DomainPausedReason(reason) == libvirt.DOMAIN_PAUSED_USER
	}
	return false
}

// adopt makes the arrived domain the launcher's, as Start does for one it created.
func (m *Manager) adopt(dom *libvirt.Domain, name string, log *slog.Logger) {
	m.startMu.Lock()
	m.mu.Lock()
	if m.result != nil || m.closed {
		// Stopped while the guest was on its way: Close, or libvirtd's end, takes it down.
		m.mu.Unlock()
		m.startMu.Unlock()
		dom.Free()
		return
	}
	m.dom = dom
	var proxy *tcpProxy
	if m.mig != nil {
		proxy = m.mig.proxy
		now := metav1.Now()
		m.mig.status.Completed = true
		m.mig.status.Message = ""
		m.mig.status.EndTime = &now
	}
	m.mu.Unlock()
	m.startMu.Unlock()
	if proxy != nil {
		// No new connections; the source's own ends when its migration job does, and cutting it
		// now could make the source believe the migration failed and resume its copy.
		proxy.CloseListener()
	}
	xml, err := dom.GetXMLDesc(0)
	if err != nil {
		log.Warn("read the migrated domain's XML", "err", err)
	}
	ifaces, agent, err := domainDevices(xml)
	if err != nil {
		log.Warn("read devices from the domain XML", "err", err)
	}
	m.mu.Lock()
	m.agent = m.agent || agent
	m.mu.Unlock()
	log.Info("the migrated guest arrived; running it", "domain", name)
	st := &loopState{name: name, ifaces: ifaces, log: log}
	m.refresh(dom, st)
	go m.loop(dom, st)
}
