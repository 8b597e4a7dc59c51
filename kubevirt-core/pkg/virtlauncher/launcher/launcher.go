// Package launcher runs one VMI as a libvirt domain for as long as the guest lives. Its Manager
// prepares the disks and the cloud-init ISO, starts a transient domain, follows its lifecycle
// events, carries out the commands virt-handler sends (shutdown, kill, pause, soft reboot, ...),
// publishes the domain's status to watchers, and reports how the guest ended so that the Pod's exit
// code tells a clean poweroff from a crash.
//
// The Manager (this file: its state, its libvirt connection, its end) is spread over files by
// concern: config.go (its Config and the paths in the state directory), result.go (how a guest
// ends: results, exit codes, errors, the termination message), start.go (converting the VMI and
// starting the domain), commands.go (stop, pause, reboot and freeze commands), loop.go (the domain
// loop: lifecycle events, stop requests, status publishing), status.go (libvirt's states and
// reasons as KubeVirt names them), volumes.go, network.go, hotplug.go, guestagent.go, and the
// live migration's migration.go (shared state and result), migration_target.go and
// migration_source.go.
package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/containerdisk"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/feed"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/guestagent"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/network"
)

var eventLoop sync.Once

// startEventLoop runs libvirt's default event loop, which delivers domain and connection events.
// It must be registered before the first connection that wants events, and runs for the life of
// the process (libvirt offers no way to stop it).
func startEventLoop() error {
	var err error
	eventLoop.Do(func() {
		if err = libvirt.EventRegisterDefaultImpl(); err != nil {
			return
		}
		go func() {
			for {
				if err := libvirt.EventRunDefaultImpl(); err != nil {
					slog.Error("libvirt event loop", "err", err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	})
	if err != nil {
		return fmt.Errorf("libvirt event loop: %w", err)
	}
	return nil
}

// Manager runs at most one domain, for one VMI, once: a launcher Pod never restarts its guest
// (virt-handler and the VM controller make a new VMI and Pod for that).
//
// All methods are safe for concurrent use and idempotent: repeating a command whose effect is
// already there succeeds.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	conn *libvirt.Connect
	feed *feed.Feed[launcherapi.DomainStatus]
	// done is closed once result is set.
	done chan struct{}
	// quit is closed by Close and ends the domain loop.
	quit chan struct{}

	// startMu serialises Start with itself and with the stop commands, so that a stop that races
	// with the start is applied to the domain the start creates.
	startMu sync.Mutex

	mu        sync.Mutex
	vmi       *kubevirtv1.VirtualMachineInstance
	dom       *libvirt.Domain // set once the domain runs, freed by Close
	result    *Result
	agent     bool // the guest agent is connected
	frozen    bool // Freeze froze the guest's filesystems
	callbacks []int
	closed    bool
	// podNet is the pod network binding, set up for the domain and removed after it; podNIC is
	// the VMI's interface on it.
	podNet *network.Pod
	podNIC string
	// mig is the live migration into or out of this launcher, nil without one (migration.go).
	mig *migration
	// cdisks are the base images of the containerDisks (containerdisks.go).
	cdisks *containerDisks
	// hp is the hotplugged disks of the domain (hotplug.go).
	hp hotplugState
	// agentPoller reads the guest agent while the domain loop runs (guestagent.go).
	agentPoller *guestagent.Poller
	// versions are libvirtd's QEMU and libvirt, read once at the connection.
	versions launcherapi.Versions

	// Fed by libvirt's callbacks and the commands, read by the domain loop.
	events     chan libvirt.DomainEventLifecycle
	connClosed chan libvirt.ConnectCloseReason
	reqs       chan request
	poke       chan struct{}
}

// New connects to libvirt. No domain exists until Start.
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("launcher: no state directory")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := startEventLoop(); err != nil {
		return nil, err
	}
	conn, err := libvirt.NewConnect(cfg.LibvirtURI)
	if err != nil {
		return nil, fmt.Errorf("connect to libvirt %s: %w", cfg.LibvirtURI, err)
	}
	cdDir := cfg.ContainerDiskDir
	if cdDir == "" {
		cdDir = containerdisk.Dir
	}
	m := &Manager{
		cdisks:     newContainerDisks(cdDir),
		cfg:        cfg,
		log:        log,
		conn:       conn,
		feed:       feed.New(launcherapi.DomainStatus{}),
		done:       make(chan struct{}),
		quit:       make(chan struct{}),
		events:     make(chan libvirt.DomainEventLifecycle, 32),
		connClosed: make(chan libvirt.ConnectCloseReason, 1),
		reqs:       make(chan request),
		poke:       make(chan struct{}, 1),
	}
	if m.versions, err = readVersions(conn); err != nil {
		conn.Close()
		return nil, err
	}
	// Keepalives make a dead libvirtd show up as a closed connection instead of silence.
	if err := conn.SetKeepAlive(5, 3); err != nil {
		conn.Close()
		return nil, fmt.Errorf("libvirt keepalive: %w", err)
	}
	if err := conn.RegisterCloseCallback(func(_ *libvirt.Connect, reason libvirt.ConnectCloseReason) {
		select {
		case m.connClosed <- reason:
		default:
		}
	}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("libvirt close callback: %w", err)
	}
	return m, nil
}

// Status is the domain's current status.
func (m *Manager) Status() launcherapi.DomainStatus { return m.feed.Current() }

// Watch subscribes to the status: the current one first, then every change. Close the watcher
// when done; Close of the Manager ends every watcher after its last status.
func (m *Manager) Watch() *feed.Watcher[launcherapi.DomainStatus] { return m.feed.Watch() }

// Done is closed when the guest is gone for good (or never started and never will).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Result is how the guest ended; valid once Done is closed.
func (m *Manager) Result() Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.result == nil {
		return Result{}
	}
	return *m.result
}

// Started tells whether Start created the domain.
func (m *Manager) Started() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dom != nil
}

// pokeLoop makes the domain loop re-read the domain's state soon.
func (m *Manager) pokeLoop() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// finish records how the guest ended, publishes the final status and closes Done. Only the first
// call counts. last is the final status to extend; nil starts from the current one.
func (m *Manager) finish(res Result, last *launcherapi.DomainStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.result != nil {
		return
	}
	m.result = &res
	st := m.feed.Current()
	if last != nil {
		st = *last
	}
	st.Result = res.API()
	// Under mu, like every publish, so that no ordinary status can follow the final one.
	m.feed.Publish(st)
	close(m.done)
}

// Close ends the watchers and releases libvirt. A domain that still runs is destroyed: nothing
// may outlive the launcher that owns it.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	dom, running := m.dom, m.result == nil && m.dom != nil
	m.mu.Unlock()
	close(m.quit)
	if running {
		m.log.Warn("destroying the domain: the launcher is closing while it runs")
		if err := dom.Destroy(); err != nil && !isNoDomain(err) {
			m.log.Error("destroy domain", "err", err)
		}
		m.finish(Result{Reason: ReasonError, Message: "the launcher closed while the guest was running", ExitCode: ExitError}, nil)
	}
	m.closeMigration()
	// Only now that QEMU is gone: the guest's NIC must not lose its tap while it runs, nor its
	// disks their base images.
	m.teardownNetwork()
	m.cdisks.close(m.log)
	m.feed.Close()
	m.unsubscribe()
	if err := m.conn.UnregisterCloseCallback(); err != nil {
		m.log.Debug("unregister libvirt close callback", "err", err)
	}
	if dom != nil {
		dom.Free()
	}
	if _, err := m.conn.Close(); err != nil {
		m.log.Debug("close libvirt connection", "err", err)
	}
}

func isNoDomain(err error) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == libvirt.ERR_NO_DOMAIN
}
