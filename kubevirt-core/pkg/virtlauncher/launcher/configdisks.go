package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/isoimage"
)

// configDisk is how the launcher presents a configMap, secret, downwardAPI, serviceAccount or
// sysprep volume to the guest: an ISO of the files the Pod holds for it, with KubeVirt's volume
// label (the volume's volumeLabel where the API has one) and file name.
type configDisk struct {
	kind, label string
}

func configDiskOf(v *kubevirtv1.Volume) (configDisk, bool) {
	switch {
	case v.ConfigMap != nil:
		return configDisk{"configMap", v.ConfigMap.VolumeLabel}, true
	case v.Secret != nil:
		return configDisk{"secret", v.Secret.VolumeLabel}, true
	case v.DownwardAPI != nil:
		return configDisk{"downwardAPI", v.DownwardAPI.VolumeLabel}, true
	case v.ServiceAccount != nil:
		return configDisk{"serviceAccount", ""}, true
	case v.Sysprep != nil:
		return configDisk{"sysprep", ""}, true
	}
	return configDisk{}, false
}

// sysprepAnswerFiles are the names Windows Setup looks for on a sysprep drive, in any case.
var sysprepAnswerFiles = []string{"autounattend.xml", "unattend.xml"}

// prepareConfigDisk writes the ISO of config volume v into stateDir from the files the Pod holds
// for it (launcherapi.ConfigVolumeDir) and returns its path. field names the volume in errors.
func prepareConfigDisk(ctx context.Context, stateDir string, v *kubevirtv1.Volume, c configDisk, field string) (string, error) {
	dir, _ := launcherapi.ConfigVolumeDir(v)
	field += "." + c.kind
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("%s: the Pod holds no files for it: %w", field, err)
	}
	if v.Sysprep != nil {
		if err := checkSysprep(dir); err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
	}
	path := filepath.Join(stateDir, c.kind+"-"+v.Name+".iso")
	if err := isoimage.Write(ctx, path, c.label, dir); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return path, nil
}

// checkSysprep makes sure a sysprep volume holds an answer file, as KubeVirt requires.
func checkSysprep(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		for _, name := range sysprepAnswerFiles {
			if strings.EqualFold(e.Name(), name) {
				return nil
			}
		}
	}
	//lint:ignore ST1005 KubeVirt's message, verbatim
	return errors.New("Sysprep drive should contain either an 'autounattend.xml' or 'unattend.xml' file")
}

// prepareEphemeral makes the throw-away overlay of an ephemeral volume in stateDir over its
// claim's image (the block device, or disk.img of a filesystem claim under mountDir), which the
// guest's writes never reach, and returns its path. A new overlay each run, as KubeVirt's.
func prepareEphemeral(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, v *kubevirtv1.Volume, stateDir, mountDir, field string) (string, error) {
	field += ".ephemeral.persistentVolumeClaim"
	if v.Ephemeral.PersistentVolumeClaim == nil {
		return "", invalidVMI(fmt.Errorf("%s: required", field))
	}
	field = fmt.Sprintf("%s %q", field, v.Ephemeral.PersistentVolumeClaim.ClaimName)
	base := filepath.Join(mountDir, v.Name, "disk.img")
	if launcherapi.BlockVolume(vmi, v.Name) {
		base = launcherapi.VolumeDevicePath(v.Name)
		if err := checkBlockDevice(base); err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
	} else if _, err := os.Stat(base); err != nil {
		// Nothing to make a blank disk from: an ephemeral volume shows what the claim holds.
		return "", fmt.Errorf("%s: %w", field, err)
	}
	path := filepath.Join(stateDir, "ephemeral-"+v.Name+".qcow2")
	os.Remove(path)
	if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base, path); err != nil {
		return "", fmt.Errorf("%s: overlay: %w", field, err)
	}
	return path, nil
}
