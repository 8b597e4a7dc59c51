// Command virt-launcher runs one virtual machine through libvirtd and QEMU.
//
// It is the compute container of the VMI's launcher Pod: it runs the guest until it stops, stops
// it gracefully on SIGTERM, and exits with 0 after a poweroff or a requested stop, and non-zero
// after a crash, writing the details to the termination log.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// gracePadding mirrors the padding virt-controller adds to the guest's grace period when it builds
// the launcher command (pkg/virtcontroller/vmi/pod.go): the launcher keeps that much for itself.
const gracePadding = 15

func main() {
	os.Exit(run())
}

func run() int {
	var (
		name           = flag.String("name", "", "name of the VMI")
		namespace      = flag.String("namespace", "", "namespace of the VMI")
		uid            = flag.String("uid", "", "UID of the VMI")
		grace          = flag.Int64("grace-period-seconds", 45, "the launcher's grace period: the guest's plus 15 s")
		vmiFile        = flag.String("vmi-file", "", "JSON file with the VMI to run")
		libvirtURI     = flag.String("libvirt-uri", "qemu:///system", "libvirtd connection URI")
		stateDir       = flag.String("state-dir", "", "directory for the VMI's disks, ISO and sockets (default /var/run/kubevirt-private/<uid>)")
		imageStore     = flag.String("image-store", "", "directory with containerDisk base images, <store>/<escaped image>/disk.qcow2")
		volumeMountDir = flag.String("volume-mount-dir", launcher.DefaultVolumeMountDir, "directory with PVC volumes as <volume>/disk.img")
		termLog        = flag.String("termination-log", launcher.DefaultTerminationLog, "file for the termination message; empty to skip")
		machineType    = flag.String("machine-type", "", "override the VMI's machine type")
		userNetwork    = flag.Bool("user-network", false, "give the guest a NIC on QEMU's user-mode network")
		emulation      = flag.Bool("emulation", false, "force TCG even when /dev/kvm exists")
		verbose        = flag.Bool("v", false, "debug logs")
	)
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "virt-launcher")
	slog.SetDefault(log)

	vmi, err := loadVMI(*vmiFile, *name, *namespace, *uid)
	if err != nil {
		log.Error("load VMI", "err", err)
		res := launcher.Result{Reason: launcher.ReasonError, Message: err.Error(), ExitCode: launcher.ExitError}
		if werr := launcher.WriteTerminationLog(*termLog, res); werr != nil {
			log.Warn("write termination message", "err", werr)
		}
		return res.ExitCode
	}
	if *stateDir == "" {
		*stateDir = filepath.Join("/var/run/kubevirt-private", string(vmi.UID))
	}
	guestGrace := *grace
	if guestGrace > gracePadding {
		guestGrace -= gracePadding
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	res, err := launcher.Run(ctx, launcher.Options{
		VMI:            vmi,
		LibvirtURI:     *libvirtURI,
		StateDir:       *stateDir,
		ImageStore:     *imageStore,
		VolumeMountDir: *volumeMountDir,
		GracePeriod:    time.Duration(guestGrace) * time.Second,
		TerminationLog: *termLog,
		Emulation:      *emulation,
		MachineType:    *machineType,
		UserNetwork:    *userNetwork,
		Logger:         log,
	})
	if err != nil {
		log.Error("run VMI", "err", err)
	}
	return res.ExitCode
}

// loadVMI reads the VMI and checks it is the one the Pod was created for.
func loadVMI(path, name, namespace, uid string) (*kubevirtv1.VirtualMachineInstance, error) {
	if path == "" {
		return nil, fmt.Errorf("--vmi-file is required until virt-handler delivers the VMI")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read VMI: %w", err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := json.Unmarshal(b, vmi); err != nil {
		return nil, fmt.Errorf("decode VMI %s: %w", path, err)
	}
	// The flags come from the Pod spec; a mismatch means the wrong VMI would run in this Pod.
	for _, c := range []struct{ flag, want, got string }{
		{"--name", name, vmi.Name},
		{"--namespace", namespace, vmi.Namespace},
		{"--uid", uid, string(vmi.UID)},
	} {
		if c.want != "" && c.want != c.got {
			return nil, fmt.Errorf("%s %q does not match the VMI file's %q", c.flag, c.want, c.got)
		}
	}
	if vmi.Name == "" || vmi.Namespace == "" {
		return nil, fmt.Errorf("VMI %s has no name or namespace", path)
	}
	return vmi, nil
}
