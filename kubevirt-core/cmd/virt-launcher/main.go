// Command virt-launcher runs one virtual machine through libvirtd and QEMU.
//
// It is the compute container of the VMI's launcher Pod. It serves virt-handler's commands
// (launcherapi) on a unix socket, starts the guest when virt-handler hands it the VMI (Sync) with
// the Pod's network bound to it (masquerade, in the Pod's network namespace the launcher runs
// in), runs its own virtlogd and libvirtd (in the Pod's private mount namespace), stops the guest
// gracefully on SIGTERM, and exits with 0 after a poweroff or a requested stop and non-zero after
// a crash, writing the details to the termination log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/d8virt/kubevirt-core/pkg/containerdisk"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/capscache"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/cmdserver"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/libvirtd"
	"github.com/d8virt/logopts"
)

// finalStatusWait is how long the launcher lingers after the guest ended so that virt-handler can
// read the final status (it tells a crash from a poweroff before the Pod's exit code is known).
const finalStatusWait = 10 * time.Second

func main() {
	os.Exit(run(os.Args[1:]))
}

type options struct {
	name, namespace, uid string
	grace                int64
	socket               string
	stateDir             string
	containerDiskDir     string
	volumeMountDir       string
	termLog              string
	emulation            bool
	startTimeout         time.Duration
	log                  logopts.Options
	nodeLabellerDir      string
	qemuCapsDir          string
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("virt-launcher", flag.ContinueOnError)
	fs.StringVar(&o.name, "name", "", "name of the VMI")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the VMI")
	fs.StringVar(&o.uid, "uid", "", "UID of the VMI")
	fs.Int64Var(&o.grace, "grace-period-seconds", 45, "the launcher's grace period: the guest's plus 15 s")
	fs.StringVar(&o.socket, "socket", filepath.Join(launcherapi.SocketsDir, launcherapi.SocketName), "unix socket for virt-handler's commands")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory for the VMI's disks, ISO and sockets (default "+launcherapi.PrivateDir+"/<uid>)")
	fs.StringVar(&o.containerDiskDir, "container-disk-dir", containerdisk.Dir, "the sockets of the Pod's containerDisk containers, <dir>/<volume>.sock")
	fs.StringVar(&o.volumeMountDir, "volume-mount-dir", launcher.DefaultVolumeMountDir, "directory with PVC volumes as <volume>/disk.img")
	fs.StringVar(&o.termLog, "termination-log", launcher.DefaultTerminationLog, "file for the termination message; empty to skip")
	fs.BoolVar(&o.emulation, "emulation", false, "force TCG even when /dev/kvm exists")
	fs.DurationVar(&o.startTimeout, "start-timeout", 4*time.Minute, "give up when no VMI arrived and started within this time")
	o.log = logopts.Default()
	o.log.Bind(fs)
	fs.StringVar(&o.nodeLabellerDir, "node-labeller-dir", "", "instead of running a VMI, write what libvirt offers guests on this node into this directory for virt-handler's node labeller, and exit (the handler Pod's init container)")
	fs.StringVar(&o.qemuCapsDir, "qemu-capabilities-dir", "", "the node's shared QEMU capabilities cache: a launcher seeds its libvirtd's cache from it, the node labeller saves its daemon's cache into it; empty for neither")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func run(args []string) int {
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		// The flag package has printed the error and the usage.
		return launcher.ExitError
	}
	h, err := o.log.Handler(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "virt-launcher:", err)
		return launcher.ExitError
	}
	log := slog.New(h).With("component", "virt-launcher")
	slog.SetDefault(log)

	if o.nodeLabellerDir != "" {
		if err := dumpCapabilities(o, log); err != nil {
			log.Error("node labeller", "err", err)
			return launcher.ExitError
		}
		return 0
	}
	res := serve(o, log)
	if res.ExitCode != launcher.ExitStopped {
		log.Error("launcher ends", "reason", res.Reason, "message", res.Message, "exitCode", res.ExitCode)
	} else {
		log.Info("launcher ends", "reason", res.Reason, "message", res.Message)
	}
	// Best effort: the exit code alone still tells the outcome.
	if err := launcher.WriteTerminationLog(o.termLog, res); err != nil {
		log.Warn("write termination message", "path", o.termLog, "err", err)
	}
	return res.ExitCode
}

func failed(err error) launcher.Result {
	return launcher.Result{Reason: launcher.ReasonError, Message: err.Error(), ExitCode: launcher.ExitError}
}

// serve runs the launcher until the guest is gone and returns how it ended.
func serve(o *options, log *slog.Logger) launcher.Result {
	id := cmdserver.Identity{Name: o.name, Namespace: o.namespace, UID: o.uid}
	if o.name == "" || o.namespace == "" || o.uid == "" {
		return failed(errors.New("--name, --namespace and --uid are required"))
	}
	if o.stateDir == "" {
		o.stateDir = filepath.Join(launcherapi.PrivateDir, id.UID)
	}
	guestGrace := o.grace
	// The launcher keeps the padding of its grace period for itself (launcherpod.GracePadding).
	if guestGrace > launcherpod.GracePadding {
		guestGrace -= launcherpod.GracePadding
	}
	grace := time.Duration(guestGrace) * time.Second

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)

	if o.qemuCapsDir != "" {
		// Without them the daemon probes QEMU first, for seconds; with them it only checks them.
		n, err := capscache.Copy(o.qemuCapsDir, capscache.Dir(libvirtd.CacheDir))
		if err != nil {
			log.Warn("seeding libvirt's QEMU capabilities cache; libvirt probes QEMU itself", "from", o.qemuCapsDir, "err", err)
		} else {
			log.Info("libvirt's QEMU capabilities cache seeded", "from", o.qemuCapsDir, "files", n)
		}
	}
	d, err := libvirtd.Start(context.Background(), libvirtd.Options{Logger: log})
	if err != nil {
		return failed(err)
	}
	defer d.Stop()
	mgr, err := launcher.New(launcher.Config{
		LibvirtURI:       libvirtd.URI,
		StateDir:         o.stateDir,
		VolumeMountDir:   o.volumeMountDir,
		ContainerDiskDir: o.containerDiskDir,
		Emulation:        o.emulation,
		Logger:           log,
	})
	if err != nil {
		return failed(err)
	}
	defer mgr.Close()

	srv := cmdserver.New(mgr, id, grace, log)
	lis, err := listen(o.socket)
	if err != nil {
		return failed(err)
	}
	gs := launcherapi.NewGRPCServer(srv)
	go func() {
		if err := gs.Serve(lis); err != nil {
			log.Error("command server", "err", err)
		}
	}()
	defer func() {
		// Closing the manager ends the Watch streams, which graceful stop would wait for.
		mgr.Close()
		stopServer(gs, log)
		os.Remove(o.socket)
	}()
	log.Info("serving commands", "socket", o.socket, "vmi", id.Namespace+"/"+id.Name, "uid", id.UID, "libvirt", libvirtd.URI)

	startTimer := time.NewTimer(o.startTimeout)
	defer startTimer.Stop()
	stopping := false
	for done := false; !done; {
		select {
		case sig := <-signals:
			if stopping {
				continue
			}
			stopping = true
			log.Info("stopping the guest", "signal", sig.String(), "grace", grace)
			if err := mgr.Shutdown(grace); err != nil {
				log.Error("shutdown", "err", err)
			}
		case <-startTimer.C:
			if mgr.Abandon(failed(fmt.Errorf("no VMI from virt-handler started within %s", o.startTimeout))) {
				log.Error("giving up: the VMI was not started in time", "timeout", o.startTimeout)
			}
		case <-mgr.Done():
			done = true
		}
	}

	// Linger until a client has seen the final status, so that virt-handler learns how the guest
	// ended from the launcher rather than only from the Pod. A signal cuts the wait short.
	select {
	case <-srv.FinalDelivered():
	case <-time.After(finalStatusWait):
		log.Info("nobody read the final status", "waited", finalStatusWait)
	case <-signals:
	}
	return mgr.Result()
}

// listen opens the command socket, replacing a stale one (a launcher of this Pod that died left
// it), readable and writable by root only: whoever reaches it controls the guest.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("command socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("command socket: remove stale %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("command socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("command socket: %w", err)
	}
	return lis, nil
}

// stopServer lets in-flight calls finish (the final status on its way to a watcher), but not
// forever: a client that does not read must not keep the Pod alive.
func stopServer(gs interface {
	GracefulStop()
	Stop()
}, log *slog.Logger) {
	done := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		log.Warn("command server: calls still running after 5s; closing them")
		gs.Stop()
	}
}
