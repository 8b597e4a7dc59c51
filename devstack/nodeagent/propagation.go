package nodeagent

import (
	"fmt"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// SharePodsDir makes dir (the pods directory) a shared mount, as kubelet makes its root
// directory rshared: only then does a mount made on the node below a Pod's volume (virt-handler's
// hotplugged disks) reach the containers that mount the volume with HostToContainer propagation.
// A dir that is not a mount point yet is bound onto itself first; undo removes that bind again.
func SharePodsDir(dir string) (undo func() error, err error) {
	undo = func() error { return nil }
	mounted, shared, err := mountPropagation(dir)
	if err != nil {
		return undo, err
	}
	if shared {
		return undo, nil
	}
	if !mounted {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return undo, fmt.Errorf("bind %s onto itself: %w", dir, err)
		}
		undo = func() error {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", dir, err)
			}
			return nil
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		_ = undo()
		return func() error { return nil }, fmt.Errorf("make %s shared: %w", dir, err)
	}
	return undo, nil
}

// mountPropagation tells whether dir is a mount point in this mount namespace and whether it
// is shared (mountinfo's optional field "shared:N").
func mountPropagation(dir string) (mounted, shared bool, err error) {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) { return m.Mountpoint != dir, false })
	if err != nil || len(mounts) == 0 {
		return false, false, err
	}
	// The last mount on a point is the visible one.
	for _, opt := range strings.Fields(mounts[len(mounts)-1].Optional) {
		if strings.HasPrefix(opt, "shared:") {
			shared = true
		}
	}
	return true, shared, nil
}
