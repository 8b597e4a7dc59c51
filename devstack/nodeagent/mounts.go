package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
)

// containerMounts lists what container-init mounts: the private directories, /etc/hosts,
// /etc/resolv.conf, the termination log and the container's volume mounts.
func (r *podRuntime) containerMounts(pod *corev1.Pod, c *ctr, spec *corev1.Container, env []string) ([]Mount, error) {
	var ms []Mount
	for _, d := range r.p.cfg.PrivateDirs {
		ms = append(ms, Mount{Source: filepath.Join(c.dir, rootfsDir, d.Path), Target: d.Path})
	}
	if !pod.Spec.HostNetwork {
		ms = append(ms, Mount{Source: r.p.layout.EtcHosts(r.uid), Target: "/etc/hosts"})
	}
	ms = append(ms, Mount{Source: r.p.layout.ResolvConf(r.uid), Target: "/etc/resolv.conf"})
	// A pulled containerDisk image shows its disk where KubeVirt's layout has it.
	if c.pull.rootfs != "" {
		if st, err := os.Stat(filepath.Join(c.pull.rootfs, ContainerDiskDir)); err == nil && st.IsDir() {
			ms = append(ms, Mount{Source: filepath.Join(c.pull.rootfs, ContainerDiskDir), Target: ContainerDiskDir, ReadOnly: true})
		}
	}
	tmp := spec.TerminationMessagePath
	if tmp == "" {
		tmp = corev1.TerminationMessagePathDefault
	}
	ms = append(ms, Mount{Source: filepath.Join(c.dir, termLogFile), Target: tmp})
	_, mountsOf := EffectiveVolumes(pod, r.state.Automount)
	for _, vm := range mountsOf(spec) {
		src, ok := r.state.Volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no such volume", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = ExpandArgs(env, []string{vm.SubPathExpr})[0]
		}
		if sub != "" {
			clean := filepath.Clean(sub)
			if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("volumeMount %q: subPath %q leaves the volume", vm.Name, sub)
			}
			src = filepath.Join(src, clean)
			if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		ms = append(ms, Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly,
			HostToContainer: vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationHostToContainer})
	}
	devs, err := deviceMounts(spec, r.state.Volumes)
	if err != nil {
		return nil, err
	}
	return append(ms, devs...), nil
}

// programMounts show the container's program at its path, read-only, where that path is below
// a private directory (a bin dir in /tmp), as an image shows its binary in its root: exec finds
// it, and a program that reads itself (os.Executable, /proc/self/exe) does too. path is the
// program as exec'd, real the same with symlinks resolved (bin/<tag> links a release's build
// elsewhere); either may be hidden, and both show the real file.
func programMounts(private []PrivateDir, path, real string) []Mount {
	var ms []Mount
	for _, target := range []string{path, real} {
		if len(ms) > 0 && ms[0].Target == target {
			continue
		}
		for _, d := range private {
			if strings.HasPrefix(target, d.Path+"/") {
				ms = append(ms, Mount{Source: real, Target: target, ReadOnly: true})
				break
			}
		}
	}
	return ms
}

// unmountUnder detaches every mount point below dir, deepest first.
func unmountUnder(dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return err
	}
	points := make([]string, 0, len(mounts))
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}
