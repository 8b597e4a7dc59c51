package launcher

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
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
