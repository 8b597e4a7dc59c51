package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/cloudinit"
)

// prepareVolumes creates what each volume needs on disk and returns the file of each.
// Errors about the VMI's own fields are InvalidVMIErrors; a missing image or PVC file is not, as it
// may still appear.
func prepareVolumes(ctx context.Context, cfg Config, vmi *kubevirtv1.VirtualMachineInstance, log *slog.Logger) (map[string]string, error) {
	mountDir := cfg.VolumeMountDir
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
			if cfg.ImageStore == "" {
				return nil, fmt.Errorf("%s.containerDisk: no image store configured", field)
			}
			base := ImagePath(cfg.ImageStore, v.ContainerDisk.Image)
			if _, err := os.Stat(base); err != nil {
				return nil, fmt.Errorf("%s.containerDisk.image %q: not in the image store: %w", field, v.ContainerDisk.Image, err)
			}
			// A fresh overlay each run: containerDisks are ephemeral and the base stays pristine,
			// shared by every VMI that uses the image.
			path = filepath.Join(cfg.StateDir, "disk-"+v.Name+".qcow2")
			os.Remove(path)
			if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, path); err != nil {
				return nil, fmt.Errorf("%s.containerDisk: overlay: %w", field, err)
			}
		case v.EmptyDisk != nil:
			size := v.EmptyDisk.Capacity.Value()
			if size <= 0 {
				return nil, invalidVMI(fmt.Errorf("%s.emptyDisk.capacity: must be positive", field))
			}
			// Ephemeral too: a new empty disk for each run of the VMI.
			path = filepath.Join(cfg.StateDir, "empty-"+v.Name+".qcow2")
			os.Remove(path)
			if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10)); err != nil {
				return nil, fmt.Errorf("%s.emptyDisk: %w", field, err)
			}
		case v.CloudInitNoCloud != nil:
			data, err := cloudinit.NoCloudData(vmi, v.CloudInitNoCloud, field+".cloudInitNoCloud")
			if err != nil {
				return nil, invalidVMI(err)
			}
			path = filepath.Join(cfg.StateDir, "noCloud-"+v.Name+".iso")
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
		return "", invalidVMI(fmt.Errorf("%s.path: empty", field))
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
		return "", invalidVMI(fmt.Errorf("%s.capacity: required to create %s", field, hd.Path))
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
