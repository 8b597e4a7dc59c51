package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// deviceMounts are the container's volumeDevices as bind mounts of the claims' block devices
// (paths is the pod's volume paths, by name). Containers share the host's /dev, so a container
// with devices gets a /dev of its own (privateDev): creating the device paths in the host's /dev
// would leave them behind and clash between pods.
func deviceMounts(spec *corev1.Container, paths map[string]string) ([]Mount, error) {
	var ms []Mount
	for _, d := range spec.VolumeDevices {
		src, ok := paths[d.Name]
		if !ok {
			return nil, fmt.Errorf("volumeDevice %q: no such volume", d.Name)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("volumeDevice %q: %w", d.Name, err)
		}
		if m := fi.Mode(); m&fs.ModeDevice == 0 || m&fs.ModeCharDevice != 0 {
			return nil, fmt.Errorf("volumeDevice %q: %s is not a block device (the claim's volume must be in volume mode Block)", d.Name, src)
		}
		if !filepath.IsAbs(d.DevicePath) {
			return nil, fmt.Errorf("volumeDevice %q: devicePath %q is not absolute", d.Name, d.DevicePath)
		}
		ms = append(ms, Mount{Source: src, Target: filepath.Clean(d.DevicePath)})
	}
	return ms, nil
}

// privateDev covers /dev with a tmpfs holding what the host's /dev holds: each entry bind-mounted
// from the host's (directories recursively, so devpts and shm come along) and symlinks copied.
// Files the container then creates in /dev (device paths, the termination log) stay its own and
// go with its mount namespace. It must run in the container's mount namespace.
func privateDev() error {
	host, err := unix.Open("/dev", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("private /dev: %w", err)
	}
	defer unix.Close(host)
	entries, err := os.ReadDir("/dev")
	if err != nil {
		return fmt.Errorf("private /dev: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID, "mode=755"); err != nil {
		return fmt.Errorf("private /dev: %w", err)
	}
	// The host's entries stay reachable through the descriptor opened before the tmpfs hid them.
	hostDir := "/proc/self/fd/" + strconv.Itoa(host)
	for _, e := range entries {
		src, dst := filepath.Join(hostDir, e.Name()), filepath.Join("/dev", e.Name())
		var err error
		switch {
		case e.Name() == "ptmx":
			// The kernel finds the devpts of a ptmx node next to it in the node's own mount, which
			// a bind of the node alone does not have; the devpts instance's own ptmx serves it.
			err = os.Symlink("pts/ptmx", dst)
		case e.Type()&fs.ModeSymlink != 0:
			var target string
			if target, err = os.Readlink(src); err == nil {
				err = os.Symlink(target, dst)
			}
		default:
			err = bindMount(Mount{Source: "/dev/" + e.Name(), Target: dst}, mountSource{path: src, isDir: e.IsDir()})
		}
		// A device removed meanwhile (a loop device detached) is simply not there.
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("private /dev: %s: %w", e.Name(), err)
		}
	}
	return nil
}
