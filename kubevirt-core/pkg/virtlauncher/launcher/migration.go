package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/network"
)

// Live migration, as KubeVirt's launchers do it but without virt-handler's proxies: the target
// launcher prepares the VMI's disks and network as for a start, opens its libvirtd on
// launcherapi.LibvirtConnectionPort of its pod IP and waits; the source launcher's libvirtd
// connects there and moves the guest peer-to-peer, QEMU's stream going straight to the target
// QEMU's DirectMigrationPort and the launcher-local disks (containerDisk overlays, emptyDisks)
// to its NBD server on BlockMigrationPort. Only the top of each overlay travels: the base image
// is the same on every node.

// ReasonMigrated: the guest moved to another launcher. The launcher exits 0, and nothing about
// the VMI ended.
const ReasonMigrated Reason = "Migrated"

// Errors of the migration calls; the command server maps them to FailedPrecondition.
var (
	// ErrMigrationInProgress: a migration with another UID is under way.
	ErrMigrationInProgress = errors.New("another migration of this guest is in progress")
	// ErrAlreadyRunning: a launcher that runs a guest cannot receive one.
	ErrAlreadyRunning = errors.New("this launcher already runs a guest")
)

// incomingPoll is how often a target looks for its guest besides the lifecycle events.
const incomingPoll = time.Second

// migration is the launcher's one migration, in or out. Guarded by Manager.mu.
type migration struct {
	status launcherapi.MigrationStatus
	// proxy opens the target's libvirtd to the source until the guest arrived; Close cuts what
	// is left of it.
	proxy *tcpProxy
	// target is where a source sends the guest, for the result's message.
	target string
	// cancelled: CancelMigration aborted the job.
	cancelled bool
	// timedOut says why the launcher aborted a stuck job.
	timedOut string
}

// MigrationParams is what Migrate needs to know of the target.
type MigrationParams struct {
	UID           string
	TargetAddress string
	Ports         launcherapi.MigrationPorts
	// BandwidthMiB limits the stream (MiB/s); zero is unlimited.
	BandwidthMiB uint64
}

func (p MigrationParams) validate() error {
	switch {
	case p.UID == "":
		return errors.New("no migration UID")
	case p.TargetAddress == "" || strings.ContainsAny(p.TargetAddress, "/?#@ "):
		return fmt.Errorf("target address %q", p.TargetAddress)
	}
	for _, port := range []int{p.Ports.Libvirt, p.Ports.Migration, p.Ports.Block} {
		if port <= 0 || port > 65535 {
			return fmt.Errorf("target ports %+v", p.Ports)
		}
	}
	return nil
}

// migrationStatus is a copy of the migration's status for publishing. Called with mu held.
func (m *Manager) migrationStatus() *launcherapi.MigrationStatus {
	if m.mig == nil {
		return nil
	}
	s := m.mig.status
	if s.Ports != nil {
		p := *s.Ports
		s.Ports = &p
	}
	if s.Progress != nil {
		p := *s.Progress
		s.Progress = &p
	}
	return &s
}

// awaitingIncoming reports whether the launcher was prepared as a target and has no guest yet.
func (m *Manager) awaitingIncoming() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dom == nil && m.mig != nil && m.mig.status.Role == launcherapi.MigrationRoleTarget
}

// publishMigration publishes the current status with the migration's. For a target without a
// domain, whose loop does not run yet.
func (m *Manager) publishMigration() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.result != nil {
		return
	}
	st := m.feed.Current()
	st.Migration = m.migrationStatus()
	m.feed.Publish(st)
}

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
	if _, err := prepareVolumes(ctx, m.cfg, vmi, log); err != nil {
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

// Migrate starts moving the running guest to the target and returns; the outcome shows in the
// status. Asking again for the same migration does nothing.
func (m *Manager) Migrate(p MigrationParams) error {
	if err := p.validate(); err != nil {
		return invalidVMI(fmt.Errorf("migration: %w", err))
	}
	dom, err := m.domain()
	if err != nil {
		return err
	}
	xml, err := dom.GetXMLDesc(0)
	if err != nil {
		return fmt.Errorf("migration: read the domain XML: %w", err)
	}
	m.mu.Lock()
	disks, err := localDisks(xml, m.vmi)
	if err != nil {
		m.mu.Unlock()
		return fmt.Errorf("migration: %w", err)
	}
	if cur := m.mig; cur != nil {
		switch {
		case cur.status.UID == p.UID:
			m.mu.Unlock()
			return nil
		case cur.status.Role == launcherapi.MigrationRoleSource && !cur.status.Completed && !cur.status.Failed:
			m.mu.Unlock()
			return fmt.Errorf("%w (%s)", ErrMigrationInProgress, cur.status.UID)
		}
		// An earlier migration brought the guest here, or one out failed: this one replaces it.
	}
	now := metav1.Now()
	m.mig = &migration{
		status: launcherapi.MigrationStatus{Role: launcherapi.MigrationRoleSource, UID: p.UID, StartTime: &now},
		target: p.TargetAddress,
	}
	mig := m.mig
	log := m.log.With("migration", p.UID, "target", p.TargetAddress)
	m.mu.Unlock()
	// Published before returning: the caller's next look at the status shows the migration.
	m.publishMigration()
	go m.migrateOut(dom, mig, p, disks, log)
	return nil
}

// migrationFlags and parameters of a peer-to-peer live migration to p, copying disks (the
// launcher-local ones; their backing images exist on the target).
func migrationRequest(p MigrationParams, disks []string) (string, *libvirt.DomainMigrateParameters, libvirt.DomainMigrateFlags) {
	host := func(port int) string { return net.JoinHostPort(p.TargetAddress, strconv.Itoa(port)) }
	dconn := "qemu+tcp://" + host(p.Ports.Libvirt) + "/system"
	params := &libvirt.DomainMigrateParameters{URISet: true, URI: "tcp://" + host(p.Ports.Migration)}
	flags := libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_ABORT_ON_ERROR
	if len(disks) > 0 {
		flags |= libvirt.MIGRATE_NON_SHARED_INC
		params.MigrateDisksSet, params.MigrateDisks = true, disks
		params.DisksPortSet, params.DisksPort = true, p.Ports.Block
	}
	if p.BandwidthMiB > 0 {
		params.BandwidthSet, params.Bandwidth = true, p.BandwidthMiB
	}
	return dconn, params, flags
}

// migrateOut runs the migration job and records its outcome. On success the domain is gone here
// and the loop ends the launcher with ReasonMigrated; on failure the guest goes on running here.
func (m *Manager) migrateOut(dom *libvirt.Domain, mig *migration, p MigrationParams, disks []string, log *slog.Logger) {
	dconn, params, flags := migrationRequest(p, disks)
	log.Info("migrating the guest", "dest", dconn, "uri", params.URI, "disks", disks)
	stop := make(chan struct{})
	go m.followJob(dom, mig, stop)
	err := dom.MigrateToURI3(dconn, params, flags)
	close(stop)
	now := metav1.Now()
	m.mu.Lock()
	if err != nil {
		mig.status.Failed = true
		mig.status.Aborted = mig.cancelled
		mig.status.Message = err.Error()
		if mig.timedOut != "" {
			mig.status.Message = "migration aborted: " + mig.timedOut + ": " + err.Error()
		}
	} else {
		mig.status.Completed = true
		mig.status.Progress = nil
	}
	if mig.status.EndTime == nil {
		mig.status.EndTime = &now
	}
	m.mu.Unlock()
	if err != nil {
		log.Error("migration failed; the guest goes on running here", "err", err, "cancelled", mig.cancelled)
	} else {
		log.Info("migration completed", "took", now.Sub(mig.status.StartTime.Time).Round(time.Millisecond).String())
	}
	m.pokeLoop()
}

// KubeVirt's default migration timeouts: a job whose remaining data has not shrunk for
// ProgressTimeout is aborted, and so is one that takes longer than CompletionTimeoutPerGiB for
// every GiB it moves.
const (
	ProgressTimeout         = 150 * time.Second
	CompletionTimeoutPerGiB = 150 * time.Second
)

// jobWatch decides when a migration job is stuck, from its statistics.
type jobWatch struct {
	start, lastProgress time.Time
	leastRemaining      uint64
}

// check takes the job's statistics at now and returns why to abort it, or "".
func (w *jobWatch) check(now time.Time, total, remaining uint64) string {
	if w.lastProgress.IsZero() || remaining < w.leastRemaining {
		w.leastRemaining, w.lastProgress = remaining, now
	}
	if d := now.Sub(w.lastProgress); d >= ProgressTimeout {
		return fmt.Sprintf("no progress for %s", d.Round(time.Second))
	}
	gib := (total + 1<<30 - 1) >> 30
	limit := CompletionTimeoutPerGiB * time.Duration(max(gib, 1))
	if d := now.Sub(w.start); d >= limit {
		return fmt.Sprintf("not completed within %s (%s per GiB of %d GiB)", limit, CompletionTimeoutPerGiB, max(gib, 1))
	}
	return ""
}

// followJob publishes the job's progress every second until stop, and aborts a stuck job.
func (m *Manager) followJob(dom *libvirt.Domain, mig *migration, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	w := &jobWatch{start: time.Now()}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		info, err := dom.GetJobStats(0)
		if err != nil || info.Type == libvirt.DOMAIN_JOB_NONE {
			continue
		}
		m.mu.Lock()
		if !mig.status.Completed && !mig.status.Failed {
			mig.status.Progress = &launcherapi.MigrationProgress{
				DataTotal: info.DataTotal, DataProcessed: info.DataProcessed, DataRemaining: info.DataRemaining,
			}
		}
		m.mu.Unlock()
		m.pokeLoop()
		if why := w.check(time.Now(), info.DataTotal, info.DataRemaining); why != "" {
			m.log.Warn("aborting the migration", "why", why, "migration", mig.status.UID)
			m.mu.Lock()
			mig.timedOut = why
			m.mu.Unlock()
			if err := dom.AbortJob(); err != nil {
				m.log.Error("abort migration", "err", err)
			}
			return
		}
	}
}

// CancelMigration aborts the outgoing migration uid if it still runs; the guest stays here. A
// migration not started yet is recorded as aborted, so that a late Migrate for it does nothing:
// whoever asked to cancel learns the outcome from the status either way.
func (m *Manager) CancelMigration(uid string) error {
	if uid == "" {
		return invalidVMI(errors.New("migration: no UID"))
	}
	m.mu.Lock()
	mig, dom := m.mig, m.dom
	switch {
	case m.result != nil || dom == nil:
		m.mu.Unlock()
		return nil
	case mig == nil || mig.status.UID != uid && (mig.status.Role != launcherapi.MigrationRoleSource || mig.status.Completed || mig.status.Failed):
		now := metav1.Now()
		m.mig = &migration{status: launcherapi.MigrationStatus{
			Role: launcherapi.MigrationRoleSource, UID: uid, Failed: true, Aborted: true,
			Message: "cancelled before it started", StartTime: &now, EndTime: &now,
		}}
		m.mu.Unlock()
		m.publishMigration()
		return nil
	case mig.status.UID != uid || mig.status.Completed || mig.status.Failed:
		m.mu.Unlock()
		return nil
	}
	mig.cancelled = true
	m.mu.Unlock()
	if err := dom.AbortJob(); err != nil {
		var lerr libvirt.Error
		if errors.As(err, &lerr) && lerr.Code == libvirt.ERR_OPERATION_INVALID {
			return nil // no job (any more): finished either way
		}
		return fmt.Errorf("abort migration: %w", err)
	}
	return nil
}

// migratedOut marks the outgoing migration completed: the source's domain stopped as migrated.
func (m *Manager) migratedOut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mig == nil || m.mig.status.Role != launcherapi.MigrationRoleSource || m.mig.status.Completed {
		return
	}
	now := metav1.Now()
	m.mig.status.Completed, m.mig.status.Failed, m.mig.status.Message = true, false, ""
	m.mig.status.Progress = nil
	m.mig.status.EndTime = &now
}

// migrationCompleted reports whether the guest left for a target.
func (m *Manager) migrationCompleted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mig != nil && m.mig.status.Role == launcherapi.MigrationRoleSource && m.mig.status.Completed
}

// migratedResult is the launcher's result once its guest moved away.
func (m *Manager) migratedResult() Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := "the guest moved to another launcher"
	if m.mig != nil {
		msg = fmt.Sprintf("the guest moved to %s (migration %s)", m.mig.target, m.mig.status.UID)
	}
	return Result{Reason: ReasonMigrated, Message: msg, ExitCode: ExitStopped}
}

// classify is the package's classify, knowing that a domain stopped as migrated moved away.
func (m *Manager) classify(detail libvirt.DomainEventStoppedDetailType, st *loopState) Result {
	if detail == libvirt.DOMAIN_EVENT_STOPPED_MIGRATED && m.migrationCompleted() {
		return m.migratedResult()
	}
	return classify(detail, st.intent, st.hostShutdown)
}

// localDisks are the target devices of the disks the launcher made for this run (containerDisk
// overlays, emptyDisks): a migration copies them. Other disks are the same file on both sides
// (a PVC) or read-only (cloud-init) and must not be copied.
func localDisks(domXML string, vmi *kubevirtv1.VirtualMachineInstance) ([]string, error) {
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(domXML); err != nil {
		return nil, fmt.Errorf("parse domain XML: %w", err)
	}
	local := map[string]bool{}
	if vmi != nil {
		for _, v := range vmi.Spec.Volumes {
			if v.ContainerDisk != nil || v.EmptyDisk != nil {
				local[v.Name] = true
			}
		}
	}
	var out []string
	if dom.Devices == nil {
		return nil, nil
	}
	for _, d := range dom.Devices.Disks {
		if d.Alias == nil || d.Target == nil || d.ReadOnly != nil {
			continue
		}
		if local[strings.TrimPrefix(d.Alias.Name, converter.AliasPrefix)] {
			out = append(out, d.Target.Dev)
		}
	}
	return out, nil
}

// closeMigration cuts the target's proxy, if any. Called by Close.
func (m *Manager) closeMigration() {
	m.mu.Lock()
	var proxy *tcpProxy
	if m.mig != nil {
		proxy, m.mig.proxy = m.mig.proxy, nil
	}
	m.mu.Unlock()
	if proxy != nil {
		proxy.Close()
	}
}

// migrationHostPorts are the ports a target serves on its pod IP itself.
func migrationHostPorts() []network.Port {
	p := launcherapi.DefaultMigrationPorts
	return []network.Port{{Protocol: network.TCP, Port: uint16(p.Libvirt)}, {Protocol: network.TCP, Port: uint16(p.Migration)}, {Protocol: network.TCP, Port: uint16(p.Block)}}
}
