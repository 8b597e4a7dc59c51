// Package cloudinit builds the NoCloud data source ISO a VMI's cloudInitNoCloud volume describes.
package cloudinit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// NoCloud is the content of a NoCloud data source.
type NoCloud struct {
	MetaData    string
	UserData    string
	NetworkData string
}

// NoCloudData resolves the data of a cloudInitNoCloud volume. field names the volume in errors,
// for example "spec.volumes[1].cloudInitNoCloud".
func NoCloudData(vmi *kubevirtv1.VirtualMachineInstance, src *kubevirtv1.CloudInitNoCloudSource, field string) (NoCloud, error) {
	// Secret references are resolved by mounting the Secret into the launcher Pod; that path does
	// not exist yet, and silently booting without the user's data would be worse than failing.
	if src.UserDataSecretRef != nil {
		return NoCloud{}, fmt.Errorf("%s.secretRef: user data from a Secret is not supported yet", field)
	}
	if src.NetworkDataSecretRef != nil {
		return NoCloud{}, fmt.Errorf("%s.networkDataSecretRef: network data from a Secret is not supported yet", field)
	}
	user, err := pick(src.UserData, src.UserDataBase64, field+".userDataBase64")
	if err != nil {
		return NoCloud{}, err
	}
	network, err := pick(src.NetworkData, src.NetworkDataBase64, field+".networkDataBase64")
	if err != nil {
		return NoCloud{}, err
	}
	host := vmi.Spec.Hostname
	if host == "" {
		host = vmi.Name
	}
	return NoCloud{
		// instance-id changes with the VMI identity, so cloud-init reruns its per-instance modules
		// for a new VMI but not for a restart of the same one.
		MetaData:    fmt.Sprintf("instance-id: %s.%s\nlocal-hostname: %s\n", vmi.Namespace, vmi.Name, host),
		UserData:    user,
		NetworkData: network,
	}, nil
}

func pick(plain, b64, field string) (string, error) {
	if plain != "" || b64 == "" {
		return plain, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return string(b), nil
}

// WriteISO writes data as a NoCloud ISO (volume label "cidata") to path, replacing it atomically.
// It uses xorriso, or genisoimage when xorriso is missing.
func WriteISO(ctx context.Context, path string, data NoCloud) error {
	dir := filepath.Dir(path)
	src, err := os.MkdirTemp(dir, ".cidata-")
	if err != nil {
		return fmt.Errorf("cloud-init ISO: %w", err)
	}
	defer os.RemoveAll(src)
	files := []string{"meta-data", "user-data"}
	contents := map[string]string{"meta-data": data.MetaData, "user-data": data.UserData}
	// An empty network-config file would tell cloud-init to configure no network at all.
	if data.NetworkData != "" {
		files = append(files, "network-config")
		contents["network-config"] = data.NetworkData
	}
	args := []string{"-quiet", "-V", "cidata", "-J", "-r", "-o", path + ".tmp"}
	for _, f := range files {
		p := filepath.Join(src, f)
		if err := os.WriteFile(p, []byte(contents[f]), 0o644); err != nil {
			return fmt.Errorf("cloud-init ISO: %w", err)
		}
		args = append(args, p)
	}

	var cmd *exec.Cmd
	if _, err := exec.LookPath("xorriso"); err == nil {
		cmd = exec.CommandContext(ctx, "xorriso", append([]string{"-as", "mkisofs"}, args...)...)
	} else if _, err := exec.LookPath("genisoimage"); err == nil {
		cmd = exec.CommandContext(ctx, "genisoimage", args...)
	} else {
		return errors.New("cloud-init ISO: neither xorriso nor genisoimage is installed")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(path + ".tmp")
		return fmt.Errorf("cloud-init ISO: %s: %w: %s", filepath.Base(cmd.Path), err, out)
	}
	// QEMU may run as another user than the launcher; the ISO holds nothing the guest's host
	// needs to hide from it.
	if err := os.Chmod(path+".tmp", 0o644); err != nil {
		return fmt.Errorf("cloud-init ISO: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("cloud-init ISO: %w", err)
	}
	return nil
}
