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
	"syscall"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/cloudinit"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// prepareCloudInit writes the data source ISO of a cloudInitNoCloud or cloudInitConfigDrive
// volume into dir and returns its path.
func prepareCloudInit(ctx context.Context, dir string, vmi *kubevirtv1.VirtualMachineInstance, v *kubevirtv1.Volume, field string) (string, error) {
	var data cloudinit.Data
	var err error
	var path string
	if v.CloudInitNoCloud != nil {
		field += ".cloudInitNoCloud"
		data, err = cloudinit.NoCloudData(vmi, v.CloudInitNoCloud, field)
		path = filepath.Join(dir, "noCloud-"+v.Name+".iso")
	} else {
		field += ".cloudInitConfigDrive"
		// The drive's uuid is the one the guest's firmware reports, as config drive readers expect.
		data, err = cloudinit.ConfigDriveData(vmi, v.CloudInitConfigDrive, converter.DomainUUID(vmi), field)
		path = filepath.Join(dir, "configDrive-"+v.Name+".iso")
	}
	if err != nil {
		return "", invalidVMI(err)
	}
	if err := cloudinit.WriteISO(ctx, path, data); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return path, nil
}

// checkBlockDevice makes sure path is a block device: a claim whose device did not reach the Pod
// must not make QEMU open whatever file sits there.
func checkBlockDevice(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if m := fi.Mode(); m&os.ModeDevice == 0 || m&os.ModeCharDevice != 0 {
		return fmt.Errorf("%s is not a block device", path)
	}
	return nil
}

// prepareVolumes creates what each volume needs on disk and returns the file of each. With
// expand (a start, not a migration's target, whose source runs the guest) a claim's image
// smaller than its claim grows (preparePVCDisk).
// Errors about the VMI's own fields are InvalidVMIErrors; a missing image or PVC file is not, as it
// may still appear.
func prepareVolumes(ctx context.Context, cfg Config, cdisks *containerDisks, vmi *kubevirtv1.VirtualMachineInstance, expand bool, log *slog.Logger) (map[string]string, error) {
	mountDir := cfg.VolumeMountDir
	if mountDir == "" {
		mountDir = DefaultVolumeMountDir
	}
	paths := map[string]string{}
	disks := map[string]bool{}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		disks[d.Name] = true
	}
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		if hotplug.Pluggable(v) {
			// Not in the Pod yet: virt-handler brings it to the running domain (hotplug.go).
			continue
		}
		field := fmt.Sprintf("spec.volumes[%d]", i)
		var path string
		cfgDisk, isConfig := configDiskOf(v)
		switch {
		case isConfig && !disks[v.Name]:
			// The Pod holds the files of config volumes with disks only.
			continue
		case isConfig:
			var err error
			if path, err = prepareConfigDisk(ctx, cfg.StateDir, v, cfgDisk, field); err != nil {
				return nil, err
			}
		case v.Ephemeral != nil:
			var err error
			if path, err = prepareEphemeral(ctx, vmi, v, cfg.StateDir, mountDir, field); err != nil {
				return nil, err
			}
		case v.ContainerDisk != nil:
			base, err := cdisks.path(ctx, v.Name)
			if err != nil {
				return nil, fmt.Errorf("%s.containerDisk.image %q: %w", field, v.ContainerDisk.Image, err)
			}
			format, err := imageFormat(ctx, base)
			if err != nil {
				return nil, fmt.Errorf("%s.containerDisk.image %q: %w", field, v.ContainerDisk.Image, err)
			}
			// A fresh overlay each run: containerDisks are ephemeral and the base stays pristine,
			// read-only in its container.
			path = filepath.Join(cfg.StateDir, "disk-"+v.Name+".qcow2")
			os.Remove(path)
			if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", format, "-b", base, path); err != nil {
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
		case v.CloudInitNoCloud != nil, v.CloudInitConfigDrive != nil:
			var err error
			if path, err = prepareCloudInit(ctx, cfg.StateDir, vmi, v, field); err != nil {
				return nil, err
			}
		case v.HostDisk != nil:
			var err error
			if path, err = prepareHostDisk(v, mountDir, field+".hostDisk", dirBytesAvailable); err != nil {
				return nil, err
			}
		case v.PersistentVolumeClaim != nil && launcherapi.BlockVolume(vmi, v.Name):
			path = launcherapi.VolumeDevicePath(v.Name)
			if err := checkBlockDevice(path); err != nil {
				return nil, fmt.Errorf("%s.persistentVolumeClaim %q: %w", field, v.PersistentVolumeClaim.ClaimName, err)
			}
		case v.PersistentVolumeClaim != nil:
			var err error
			var from, to int64
			if path, from, to, err = preparePVCDisk(vmi, v, mountDir, expand, dirBytesAvailable); err != nil {
				return nil, fmt.Errorf("%s.persistentVolumeClaim %q: %w", field, v.PersistentVolumeClaim.ClaimName, err)
			}
			if to > 0 {
				log.Info("disk image grown to its claim", "volume", v.Name, "fromBytes", from, "toBytes", to)
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

// KubeVirt's defaults for disk images on filesystem claims: how much less space than claimed a
// provisioner may give (pvc-tolerate-less-space-up-to-percent), and what stays free on the file
// system for its own needs (minimumReservePVCBytes).
const (
	lessPVCSpaceTolerationPercent = 10
	minimumPVCReserveBytes        = 128 << 10
)

// preparePVCDisk returns the image of a PVC volume, <mountDir>/<volume>/disk.img. A filesystem
// claim without one gets a sparse raw image sized from the claim in the VMI's volume status (the
// launcher cannot read the claim itself), as KubeVirt makes it, so an empty claim is a blank disk.
// With expand, an image smaller than that grows to it, as far as the file system holds it
// (KubeVirt's disk expansion: a claim that grew gives the guest a larger disk at its next
// start); the grown sizes are returned, 0 and 0 when nothing grew. A read-only claim (an
// image's) is never written, so never grown. available tells the free bytes of a directory's
// file system.
func preparePVCDisk(vmi *kubevirtv1.VirtualMachineInstance, v *kubevirtv1.Volume, mountDir string, expand bool, available func(string) (int64, error)) (path string, from, to int64, err error) {
	dir := filepath.Join(mountDir, v.Name)
	path = filepath.Join(dir, "disk.img")
	info := claimInfo(vmi, v.Name)
	st, err := os.Stat(path)
	switch {
	case err == nil && expand && info != nil && !v.PersistentVolumeClaim.ReadOnly:
		from, to, err = expandPVCImage(info, path, st.Size(), available)
		return path, from, to, err
	case !errors.Is(err, os.ErrNotExist):
		return path, 0, 0, err
	}
	// Without the claim's mount there is nowhere to create the image: the Pod is not set up.
	if _, err := os.Stat(dir); err != nil {
		return "", 0, 0, err
	}
	path, err = createPVCImage(info, path, dir, available)
	return path, 0, 0, err
}

// claimInfo is what the VMI's status says of the claim of the volume name, nil when nothing.
func claimInfo(vmi *kubevirtv1.VirtualMachineInstance, name string) *kubevirtv1.PersistentVolumeClaimInfo {
	for _, s := range vmi.Status.VolumeStatus {
		if s.Name == name {
			return s.PersistentVolumeClaimInfo
		}
	}
	return nil
}

// expandPVCImage grows the image at path, size bytes now, to what the claim asks for
// (pvcWantedSize), or to what its file system can hold of that when less: the free space plus
// what the image already takes, less the reserve, in whole MiB. It never shrinks an image.
func expandPVCImage(info *kubevirtv1.PersistentVolumeClaimInfo, path string, size int64, available func(string) (int64, error)) (int64, int64, error) {
	const mib = 1 << 20
	want, err := pvcWantedSize(info)
	if err != nil || want <= size {
		return 0, 0, nil // a claim that says nothing usable leaves the image as it is
	}
	free, err := available(filepath.Dir(path))
	if err != nil {
		return 0, 0, fmt.Errorf("free space for %s: %w", path, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, 0, err
	}
	room := (free + st.Blocks*512 - minimumPVCReserveBytes) / mib * mib
	to := min(want, room)
	if to <= size {
		return 0, 0, nil
	}
	if err := os.Truncate(path, to); err != nil {
		return 0, 0, fmt.Errorf("grow %s to %d bytes: %w", path, to, err)
	}
	return size, to, nil
}

// createPVCImage makes a blank image at path, sized from info, in dir.
func createPVCImage(info *kubevirtv1.PersistentVolumeClaimInfo, path, dir string, available func(string) (int64, error)) (string, error) {
	if info == nil {
		return "", fmt.Errorf("no %s, and the VMI's volume status has no claim to size a new one from", path)
	}
	free, err := available(dir)
	if err != nil {
		return "", fmt.Errorf("free space for %s: %w", path, err)
	}
	size, err := pvcImageSize(info, free-minimumPVCReserveBytes)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	if err := createSparseFile(path, size); err != nil {
		return "", err
	}
	return path, nil
}

// pvcImageSize is the size of a new image on a claim with avail bytes to spare: pvcWantedSize;
// a provisioner that gave less space than that is tolerated up to
// lessPVCSpaceTolerationPercent, the image then taking what there is.
func pvcImageSize(info *kubevirtv1.PersistentVolumeClaimInfo, avail int64) (int64, error) {
	size, err := pvcWantedSize(info)
	if err != nil {
		return 0, err
	}
	return fitImageSize("claim "+info.ClaimName, size, avail)
}

// pvcWantedSize is the size of the image a claim holds: its request when that is below its
// capacity (the user asked for that size), else the capacity, aligned down to 1MiB.
func pvcWantedSize(info *kubevirtv1.PersistentVolumeClaimInfo) (int64, error) {
	const mib = 1 << 20
	capacity, hasCapacity := info.Capacity[corev1.ResourceStorage]
	request, hasRequest := info.Requests[corev1.ResourceStorage]
	var size int64
	switch {
	case hasRequest && (!hasCapacity || capacity.Cmp(request) > 0):
		size = request.Value()
	case hasCapacity:
		size = capacity.Value()
	default:
		return 0, fmt.Errorf("claim %s states neither a capacity nor a request", info.ClaimName)
	}
	size = size / mib * mib
	if size == 0 {
		return 0, fmt.Errorf("claim %s is too small for a disk: it must hold at least 1MiB", info.ClaimName)
	}
	return size, nil
}

// fitImageSize is the size of a new image of size bytes, for what, on a file system with avail
// bytes to spare: size when it fits, else what there is when that falls short by no more than
// lessPVCSpaceTolerationPercent, as KubeVirt tolerates provisioners that give a little less.
func fitImageSize(what string, size, avail int64) (int64, error) {
	const mib = 1 << 20
	if size <= avail {
		return size, nil
	}
	if size*(100-lessPVCSpaceTolerationPercent)/100 > avail {
		return 0, fmt.Errorf("not enough space: %s asks for %d bytes, only %d are free, beyond the %d%% toleration",
			what, size, max(avail, 0), lessPVCSpaceTolerationPercent)
	}
	// Whole sectors at least: the guest sees the image as a block device.
	return avail / mib * mib, nil
}

// dirBytesAvailable is what unprivileged users may still write on the file system of dir.
func dirBytesAvailable(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// createSparseFile creates path with size bytes that take no space until written. It fails if
// path exists: an image appearing meanwhile must not be cut.
func createSparseFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o660)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("size %s: %w", path, err)
	}
	return f.Close()
}

// prepareHostDisk returns the image of a hostDisk volume: the launcher Pod holds the image's
// directory at <mountDir>/<volume>, as KubeVirt mounts it. For type DiskOrCreate a missing image
// is created sparse with the volume's capacity (less when space is short, within the toleration).
// available tells the free bytes of a directory's file system.
func prepareHostDisk(v *kubevirtv1.Volume, mountDir, field string, available func(string) (int64, error)) (string, error) {
	hd := v.HostDisk
	if hd.Path == "" {
		return "", invalidVMI(fmt.Errorf("%s.path: empty", field))
	}
	dir := filepath.Join(mountDir, v.Name)
	path := filepath.Join(dir, filepath.Base(hd.Path))
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return path, nil
	case !errors.Is(err, os.ErrNotExist) || hd.Type != kubevirtv1.HostDiskExistsOrCreate:
		return "", fmt.Errorf("%s.path %s: %w", field, hd.Path, err)
	}
	size := hd.Capacity.Value()
	if size <= 0 {
		return "", invalidVMI(fmt.Errorf("%s.capacity: required to create %s", field, hd.Path))
	}
	free, err := available(dir)
	if err != nil {
		return "", fmt.Errorf("%s.path: free space for %s: %w", field, hd.Path, err)
	}
	if size, err = fitImageSize("hostDisk "+hd.Path, size, free-minimumPVCReserveBytes); err != nil {
		return "", fmt.Errorf("%s.capacity: %w", field, err)
	}
	if err := createSparseFile(path, size); err != nil {
		return "", fmt.Errorf("%s.path %s: %w", field, hd.Path, err)
	}
	return path, nil
}

func qemuImg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img %v: %w: %s", args, err, out)
	}
	return nil
}
