// Package launcher runs one VMI as a libvirt domain for as long as the guest lives: it prepares the
// disks and the cloud-init ISO, starts a transient domain, follows its lifecycle events, stops it
// gracefully when asked, and reports how the guest ended so that the Pod's exit code tells a clean
// poweroff from a crash.
package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/cloudinit"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
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
	ReasonDestroyed Reason = "Destroyed" // stopped on request, forcibly after the grace period
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

// DefaultTerminationLog is where Kubernetes reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// DefaultVolumeMountDir is where KubeVirt mounts the filesystem PVCs of a VMI, one directory per
// volume holding disk.img.
const DefaultVolumeMountDir = "/var/run/kubevirt-private/vmi-disks"

// Options configure Run.
type Options struct {
	VMI *kubevirtv1.VirtualMachineInstance
	// LibvirtURI is the libvirtd to run the domain on.
	LibvirtURI string
	// StateDir receives the VMI's disks, ISO and sockets. It must be visible to libvirtd and QEMU.
	StateDir string
	// ImageStore maps containerDisk images to base images: ImagePath(ImageStore, image).
	ImageStore string
	// VolumeMountDir holds PVC volumes as <dir>/<volume>/disk.img. Default DefaultVolumeMountDir.
	VolumeMountDir string
	// GracePeriod is how long the guest gets to power off after the ACPI request before the domain
	// is destroyed.
	GracePeriod time.Duration
	// TerminationLog receives the Result as JSON; empty skips it.
	TerminationLog string
	// Emulation forces TCG; without it TCG is used only when /dev/kvm is missing.
	Emulation bool
	// MachineType overrides the VMI's machine type (see converter.ConverterContext).
	MachineType string
	// UserNetwork gives the guest a NIC on QEMU's user-mode network (until the pod network exists).
	UserNetwork bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ConsoleSocket is the unix socket of the serial console of the VMI run with stateDir.
func ConsoleSocket(stateDir string) string { return filepath.Join(stateDir, "serial.sock") }

// VNCSocket is the unix socket of the VNC server of the VMI run with stateDir.
func VNCSocket(stateDir string) string { return filepath.Join(stateDir, "vnc.sock") }

// SerialLog holds everything the guest printed on its serial console.
func SerialLog(stateDir string) string { return filepath.Join(stateDir, "serial.log") }

// ImagePath is the base image of a containerDisk image in the image store: the reference is
// path-escaped into one directory name, so references with registries, tags and digests map
// unambiguously.
func ImagePath(store, image string) string {
	return filepath.Join(store, url.PathEscape(image), "disk.qcow2")
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

// Run runs the VMI until the guest stops, or until ctx is cancelled, in which case the guest gets
// an ACPI power-button press and GracePeriod to power off before it is destroyed. The returned
// Result is also written to TerminationLog; a non-nil error comes with ReasonError.
func Run(ctx context.Context, opts Options) (Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	res, err := run(ctx, opts, log)
	if err != nil {
		res = Result{Reason: ReasonError, Message: err.Error(), ExitCode: ExitError}
	}
	// Best effort: the exit code alone still tells the outcome.
	if werr := WriteTerminationLog(opts.TerminationLog, res); werr != nil {
		log.Warn("write termination message", "path", opts.TerminationLog, "err", werr)
	}
	return res, err
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

func run(ctx context.Context, opts Options, log *slog.Logger) (Result, error) {
	vmi := opts.VMI
	if vmi == nil {
		return Result{}, errors.New("no VMI to run")
	}
	if opts.StateDir == "" {
		return Result{}, errors.New("no state directory")
	}
	log = log.With("vmi", vmi.Namespace+"/"+vmi.Name)
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return Result{}, fmt.Errorf("state dir: %w", err)
	}
	// Sockets of an earlier run would make QEMU fail to bind.
	for _, p := range []string{ConsoleSocket(opts.StateDir), VNCSocket(opts.StateDir)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Result{}, fmt.Errorf("remove stale socket: %w", err)
		}
	}

	paths, err := prepareVolumes(ctx, opts, log)
	if err != nil {
		return Result{}, err
	}
	emulation := opts.Emulation
	if _, err := os.Stat("/dev/kvm"); err != nil {
		emulation = true
	}
	spec, err := converter.Domain(vmi, converter.ConverterContext{
		Emulation:    emulation,
		MachineType:  opts.MachineType,
		VolumePaths:  paths,
		SerialSocket: ConsoleSocket(opts.StateDir),
		SerialLog:    SerialLog(opts.StateDir),
		VNCSocket:    VNCSocket(opts.StateDir),
		UserNetwork:  opts.UserNetwork,
	})
	if err != nil {
		return Result{}, fmt.Errorf("convert VMI: %w", err)
	}
	xml, err := spec.Marshal()
	if err != nil {
		return Result{}, fmt.Errorf("marshal domain: %w", err)
	}

	if err := startEventLoop(); err != nil {
		return Result{}, err
	}
	conn, err := libvirt.NewConnect(opts.LibvirtURI)
	if err != nil {
		return Result{}, fmt.Errorf("connect to libvirt %s: %w", opts.LibvirtURI, err)
	}
	defer conn.Close()
	// Keepalives make a dead libvirtd show up as a closed connection instead of silence.
	if err := conn.SetKeepAlive(5, 3); err != nil {
		return Result{}, fmt.Errorf("libvirt keepalive: %w", err)
	}
	closed := make(chan libvirt.ConnectCloseReason, 1)
	if err := conn.RegisterCloseCallback(func(_ *libvirt.Connect, reason libvirt.ConnectCloseReason) {
		select {
		case closed <- reason:
		default:
		}
	}); err != nil {
		return Result{}, fmt.Errorf("libvirt close callback: %w", err)
	}
	defer conn.UnregisterCloseCallback()

	events := make(chan libvirt.DomainEventLifecycle, 32)
	cb, err := conn.DomainEventLifecycleRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
		// Registered for all domains, before the domain exists, so that no event is missed.
		if name, err := d.GetName(); err != nil || name != spec.Name {
			return
		}
		select {
		case events <- *ev:
		default:
			// Only STOPPED matters and it comes last; a full buffer of earlier events is harmless.
		}
	})
	if err != nil {
		return Result{}, fmt.Errorf("register for domain events: %w", err)
	}
	defer conn.DomainEventDeregister(cb)

	// A domain of the same name is left over from an earlier launcher of this VMI that died; the
	// new one owns the VMI now.
	if old, err := conn.LookupDomainByName(spec.Name); err == nil {
		log.Warn("destroying a leftover domain", "domain", spec.Name)
		if err := old.Destroy(); err != nil && !isNoDomain(err) {
			old.Free()
			return Result{}, fmt.Errorf("destroy leftover domain %s: %w", spec.Name, err)
		}
		old.Free()
	}

	dom, err := conn.DomainCreateXML(xml, 0)
	if err != nil {
		return Result{}, fmt.Errorf("start domain %s: %w", spec.Name, err)
	}
	defer dom.Free()
	log.Info("domain started", "domain", spec.Name, "emulation", emulation, "console", ConsoleSocket(opts.StateDir))

	return watch(ctx, opts, log, dom, events, closed)
}

// watch waits for the domain to stop and stops it when ctx ends.
func watch(ctx context.Context, opts Options, log *slog.Logger, dom *libvirt.Domain, events <-chan libvirt.DomainEventLifecycle, closed <-chan libvirt.ConnectCloseReason) (Result, error) {
	var (
		stopping   bool
		destroyed  bool
		graceTimer <-chan time.Time
		// QEMU reports a SHUTDOWN before it exits; its detail tells a guest poweroff from a
		// signal sent to QEMU from outside (which also ends in STOPPED_SHUTDOWN).
		hostShutdown bool
	)
	done := ctx.Done()
	// A safety net in case libvirt drops the STOPPED event: poll the state now and then.
	poll := time.NewTicker(5 * time.Second)
	defer poll.Stop()
	for {
		select {
		case <-done:
			done = nil
			stopping = true
			log.Info("stopping the guest: ACPI power button", "grace", opts.GracePeriod)
			if err := dom.ShutdownFlags(libvirt.DOMAIN_SHUTDOWN_ACPI_POWER_BTN); err != nil && !isNoDomain(err) {
				log.Warn("ACPI shutdown failed; destroying", "err", err)
				graceTimer = time.After(0)
				continue
			}
			graceTimer = time.After(opts.GracePeriod)

		case <-graceTimer:
			graceTimer = nil
			log.Warn("guest did not power off within the grace period; destroying", "grace", opts.GracePeriod)
			destroyed = true
			if err := dom.Destroy(); err != nil && !isNoDomain(err) {
				return Result{}, fmt.Errorf("destroy domain: %w", err)
			}

		case ev := <-events:
			log.Debug("domain event", "event", ev.String(), "code", int(ev.Event), "detail", ev.Detail)
			switch ev.Event {
			case libvirt.DOMAIN_EVENT_SHUTDOWN:
				hostShutdown = libvirt.DomainEventShutdownDetailType(ev.Detail) == libvirt.DOMAIN_EVENT_SHUTDOWN_HOST
			case libvirt.DOMAIN_EVENT_STOPPED:
				res := classify(libvirt.DomainEventStoppedDetailType(ev.Detail), stopping, destroyed, hostShutdown)
				log.Info("domain stopped", "reason", res.Reason, "message", res.Message, "exitCode", res.ExitCode)
				return res, nil
			case libvirt.DOMAIN_EVENT_CRASHED:
				// on_crash=destroy follows; the STOPPED event then carries CRASHED.
				log.Warn("guest crashed")
			}

		case <-poll.C:
			state, _, err := dom.GetState()
			if isNoDomain(err) || (err == nil && state == libvirt.DOMAIN_SHUTOFF) {
				// Give a late event a moment before concluding without it.
				select {
				case ev := <-events:
					if ev.Event == libvirt.DOMAIN_EVENT_STOPPED {
						return classify(libvirt.DomainEventStoppedDetailType(ev.Detail), stopping, destroyed, hostShutdown), nil
					}
				case <-time.After(2 * time.Second):
				}
				if stopping {
					return Result{Reason: ReasonDestroyed, Message: "domain gone after a stop request", ExitCode: ExitStopped}, nil
				}
				return Result{Reason: ReasonCrashed, Message: "domain disappeared without a lifecycle event", ExitCode: ExitCrashed}, nil
			}

		case reason := <-closed:
			return Result{}, fmt.Errorf("lost the connection to libvirt (reason %d); the guest's fate is unknown", reason)
		}
	}
}

// classify maps the STOPPED event detail to a Result.
func classify(detail libvirt.DomainEventStoppedDetailType, stopping, destroyed, hostShutdown bool) Result {
	switch detail {
	case libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN:
		if hostShutdown && !stopping {
			return Result{Reason: ReasonCrashed, Message: "QEMU was terminated from outside", ExitCode: ExitCrashed}
		}
		return Result{Reason: ReasonShutdown, Message: "the guest powered off", ExitCode: ExitStopped}
	case libvirt.DOMAIN_EVENT_STOPPED_DESTROYED:
		if destroyed || stopping {
			return Result{Reason: ReasonDestroyed, Message: "destroyed after the grace period", ExitCode: ExitStopped}
		}
		return Result{Reason: ReasonCrashed, Message: "the domain was destroyed by someone else", ExitCode: ExitCrashed}
	case libvirt.DOMAIN_EVENT_STOPPED_CRASHED:
		return Result{Reason: ReasonCrashed, Message: "the guest crashed", ExitCode: ExitCrashed}
	case libvirt.DOMAIN_EVENT_STOPPED_FAILED:
		return Result{Reason: ReasonCrashed, Message: "QEMU exited unexpectedly", ExitCode: ExitCrashed}
	default:
		return Result{Reason: ReasonCrashed, Message: fmt.Sprintf("the domain stopped unexpectedly (detail %d)", detail), ExitCode: ExitCrashed}
	}
}

// prepareVolumes creates what each volume needs on disk and returns the file of each.
func prepareVolumes(ctx context.Context, opts Options, log *slog.Logger) (map[string]string, error) {
	vmi := opts.VMI
	mountDir := opts.VolumeMountDir
	if mountDir == "" {
		mountDir = DefaultVolumeMountDir
	}
	paths := map[string]string{}
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		field := fmt.Sprintf("spec.volumes[%d]", i)
		var path string
		switch {
		case v.ContainerDisk != nil:
			if opts.ImageStore == "" {
				return nil, fmt.Errorf("%s.containerDisk: no image store configured", field)
			}
			base := ImagePath(opts.ImageStore, v.ContainerDisk.Image)
			if _, err := os.Stat(base); err != nil {
				return nil, fmt.Errorf("%s.containerDisk.image %q: not in the image store: %w", field, v.ContainerDisk.Image, err)
			}
			// A fresh overlay each run: containerDisks are ephemeral and the base stays pristine,
			// shared by every VMI that uses the image.
			path = filepath.Join(opts.StateDir, "disk-"+v.Name+".qcow2")
			os.Remove(path)
			if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, path); err != nil {
				return nil, fmt.Errorf("%s.containerDisk: overlay: %w", field, err)
			}
		case v.EmptyDisk != nil:
			size := v.EmptyDisk.Capacity.Value()
			if size <= 0 {
				return nil, fmt.Errorf("%s.emptyDisk.capacity: must be positive", field)
			}
			// Ephemeral too: a new empty disk for each run of the VMI.
			path = filepath.Join(opts.StateDir, "empty-"+v.Name+".qcow2")
			os.Remove(path)
			if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10)); err != nil {
				return nil, fmt.Errorf("%s.emptyDisk: %w", field, err)
			}
		case v.CloudInitNoCloud != nil:
			data, err := cloudinit.NoCloudData(vmi, v.CloudInitNoCloud, field+".cloudInitNoCloud")
			if err != nil {
				return nil, err
			}
			path = filepath.Join(opts.StateDir, "noCloud-"+v.Name+".iso")
			if err := cloudinit.WriteISO(ctx, path, data); err != nil {
				return nil, fmt.Errorf("%s.cloudInitNoCloud: %w", field, err)
			}
		case v.HostDisk != nil:
			var err error
			if path, err = prepareHostDisk(v.HostDisk, field+".hostDisk"); err != nil {
				return nil, err
			}
		case v.PersistentVolumeClaim != nil:
			path = filepath.Join(mountDir, v.Name, "disk.img")
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("%s.persistentVolumeClaim %q: %w", field, v.PersistentVolumeClaim.ClaimName, err)
			}
		default:
			// Volumes without a disk are legal (the converter rejects disks on unsupported ones).
			continue
		}
		log.Debug("volume ready", "volume", v.Name, "path", path)
		paths[v.Name] = path
	}
	return paths, nil
}

// prepareHostDisk checks the hostDisk file, creating a sparse one for type DiskOrCreate.
func prepareHostDisk(hd *kubevirtv1.HostDisk, field string) (string, error) {
	if hd.Path == "" {
		return "", fmt.Errorf("%s.path: empty", field)
	}
	_, err := os.Stat(hd.Path)
	switch {
	case err == nil:
		return hd.Path, nil
	case !errors.Is(err, os.ErrNotExist) || hd.Type != kubevirtv1.HostDiskExistsOrCreate:
		return "", fmt.Errorf("%s.path: %w", field, err)
	}
	size := hd.Capacity.Value()
	if size <= 0 {
		return "", fmt.Errorf("%s.capacity: required to create %s", field, hd.Path)
	}
	if err := os.MkdirAll(filepath.Dir(hd.Path), 0o755); err != nil {
		return "", fmt.Errorf("%s.path: %w", field, err)
	}
	f, err := os.OpenFile(hd.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("%s.path: %w", field, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return "", fmt.Errorf("%s.path: size %s: %w", field, hd.Path, err)
	}
	return hd.Path, nil
}

func qemuImg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img %v: %w: %s", args, err, out)
	}
	return nil
}

func isNoDomain(err error) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == libvirt.ERR_NO_DOMAIN
}
