// Package launcher runs one VMI as a libvirt domain for as long as the guest lives. Its Manager
// prepares the disks and the cloud-init ISO, starts a transient domain, follows its lifecycle
// events, carries out the commands virt-handler sends (shutdown, kill, pause, soft reboot, ...),
// publishes the domain's status to watchers, and reports how the guest ended so that the Pod's exit
// code tells a clean poweroff from a crash.
package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/feed"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/guestagent"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/network"
)

// Exit codes of virt-launcher. The Pod's container exit code carries them to whoever decides about
// restarts (RerunOnFailure restarts after ExitCrashed, not after ExitStopped).
const (
	// ExitStopped: the guest powered off, or it was stopped on request (also when it had to be
	// destroyed after the grace period: the stop was wanted, the guest merely ignored ACPI).
	ExitStopped = 0
	// ExitError: the launcher could not start the guest or lost libvirt.
	ExitError = 1
	// ExitCrashed: QEMU died, was killed from outside, or the guest crashed.
	ExitCrashed = 2
)

// Reason says how the guest ended.
type Reason string

const (
	ReasonShutdown  Reason = "Shutdown"  // the guest powered itself off (or did so on the ACPI request)
	ReasonDestroyed Reason = "Destroyed" // stopped on request, forcibly (Kill, or after the grace period)
	ReasonCrashed   Reason = "Crashed"   // QEMU or the guest failed
	ReasonError     Reason = "Error"     // the launcher failed
)

// Result is how the guest ended.
type Result struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
	// ExitCode is what virt-launcher exits with.
	ExitCode int `json:"exitCode"`
}

// API is the Result as the command protocol carries it.
func (r Result) API() *launcherapi.Result {
	return &launcherapi.Result{Reason: string(r.Reason), Message: r.Message, ExitCode: r.ExitCode}
}

// DefaultTerminationLog is where Kubernetes reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// DefaultVolumeMountDir is where KubeVirt mounts the filesystem PVCs of a VMI, one directory per
// volume holding disk.img.
const DefaultVolumeMountDir = "/var/run/kubevirt-private/vmi-disks"

// Errors of the domain commands; the command server turns them into gRPC codes.
var (
	ErrNotStarted = errors.New("the VMI has not been started yet")
	ErrFinished   = errors.New("the guest has stopped")
	ErrPaused     = errors.New("VMI is paused")
	// The wording is libvirt's, which is what KubeVirt users see for a guest without an agent.
	ErrNoGuestAgent = errors.New("guest agent is not responding: QEMU guest agent is not connected")
)

// InvalidVMIError is a VMI the launcher cannot run as given: a field the converter or the volume
// preparation rejects. Sending the same VMI again fails the same way.
type InvalidVMIError struct{ Err error }

func (e *InvalidVMIError) Error() string { return e.Err.Error() }
func (e *InvalidVMIError) Unwrap() error { return e.Err }

func invalidVMI(err error) error { return &InvalidVMIError{Err: err} }

// Config is what the Manager needs besides the VMI.
type Config struct {
	// LibvirtURI is the libvirtd to run the domain on.
	LibvirtURI string
	// StateDir receives the VMI's disks, ISO and sockets. It must be visible to libvirtd and QEMU.
	StateDir string
	// ImageStore maps containerDisk images to base images: ImagePath(ImageStore, image).
	ImageStore string
	// VolumeMountDir holds PVC volumes as <dir>/<volume>/disk.img. Default DefaultVolumeMountDir.
	VolumeMountDir string
	// Emulation forces TCG; without it TCG is used only when /dev/kvm is missing.
	Emulation bool
	// ResolvConf is the Pod's resolver configuration the guest's DHCP lease passes on. Default
	// /etc/resolv.conf.
	ResolvConf string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ConsoleSocket is the unix socket of the serial console of the VMI run with stateDir.
func ConsoleSocket(stateDir string) string {
	return filepath.Join(stateDir, launcherapi.SerialSocketName)
}

// VNCSocket is the unix socket of the VNC server of the VMI run with stateDir.
func VNCSocket(stateDir string) string { return filepath.Join(stateDir, launcherapi.VNCSocketName) }

// SerialLog holds everything the guest printed on its serial console.
func SerialLog(stateDir string) string { return filepath.Join(stateDir, "serial.log") }

// ImagePath is the base image of a containerDisk image in the image store: the reference is
// path-escaped into one directory name, so references with registries, tags and digests map
// unambiguously.
func ImagePath(store, image string) string {
	return filepath.Join(store, url.PathEscape(image), "disk.qcow2")
}

// WriteTerminationLog writes res as JSON to path, where Kubernetes picks it up as the container's
// termination message. An empty path writes nothing.
func WriteTerminationLog(path string, res Result) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("termination message: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("termination message: %w", err)
	}
	return nil
}

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
	// hp is the hotplugged disks of the domain (hotplug.go).
	hp hotplugState
	// agentPoller reads the guest agent while the domain loop runs (guestagent.go).
	agentPoller *guestagent.Poller

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
	m := &Manager{
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
	paths, err := prepareVolumes(ctx, m.cfg, vmi, log)
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
	dom, err := m.conn.DomainCreateXML(xml, 0)
	if err != nil {
		m.unsubscribe()
		return nil, "", fmt.Errorf("start domain %s: %w", name, err)
	}
	started = true
	log.Info("domain started", "domain", name, "emulation", emulation, "console", ConsoleSocket(state))
	return dom, name, nil
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
	// Only now that QEMU is gone: the guest's NIC must not lose its tap while it runs.
	m.teardownNetwork()
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
	s := launcherapi.DomainStatus{
		Defined:             true,
		Interfaces:          m.withGuestIPs(st.ifaces),
		GuestAgentConnected: m.agent,
		Frozen:              m.frozen,
		Migration:           m.migrationStatus(),
		HotplugVolumes:      m.hotplugStatus(),
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

func isNoDomain(err error) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == libvirt.ERR_NO_DOMAIN
}
