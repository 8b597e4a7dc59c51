package launcher

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestConfigDiskOf(t *testing.T) {
	ref := corev1.LocalObjectReference{Name: "x"}
	for _, tc := range []struct {
		src  kubevirtv1.VolumeSource
		want configDisk
		ok   bool
	}{
		{kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: ref, VolumeLabel: "CFG"}}, configDisk{"configMap", "CFG"}, true},
		{kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "s", VolumeLabel: "SEC"}}, configDisk{"secret", "SEC"}, true},
		{kubevirtv1.VolumeSource{DownwardAPI: &kubevirtv1.DownwardAPIVolumeSource{VolumeLabel: "META"}}, configDisk{"downwardAPI", "META"}, true},
		{kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "sa"}}, configDisk{"serviceAccount", ""}, true},
		{kubevirtv1.VolumeSource{Sysprep: &kubevirtv1.SysprepSource{Secret: &ref}}, configDisk{"sysprep", ""}, true},
		{kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{}}, configDisk{}, false},
	} {
		got, ok := configDiskOf(&kubevirtv1.Volume{Name: "v", VolumeSource: tc.src})
		if got != tc.want || ok != tc.ok {
			t.Errorf("%+v: got %+v, %v; want %+v, %v", tc.src, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCheckSysprep(t *testing.T) {
	for _, tc := range []struct {
		files []string
		ok    bool
	}{
		{[]string{"autounattend.xml"}, true},
		{[]string{"Unattend.xml", "other"}, true},
		{[]string{"AutoUnattend.XML"}, true},
		{[]string{"answers.xml"}, false},
		{nil, false},
	} {
		dir := t.TempDir()
		for _, f := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("<unattend/>"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := checkSysprep(dir)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok %v", tc.files, err, tc.ok)
		}
		if err != nil && err.Error() != "Sysprep drive should contain either an 'autounattend.xml' or 'unattend.xml' file" {
			t.Errorf("message %q", err)
		}
	}
}

// TestPrepareEphemeral makes the overlay over a filesystem claim's image: a qcow2 file backed by
// disk.img, read as raw, which the claim's image never sees a write of; a claim without an image
// has nothing to show.
func TestPrepareEphemeral(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed")
	}
	mountDir, stateDir := t.TempDir(), t.TempDir()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	v := &kubevirtv1.Volume{Name: "golden", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden-pvc"}}}}
	ctx := context.Background()
	if _, err := prepareEphemeral(ctx, vmi, v, stateDir, mountDir, "spec.volumes[3]"); err == nil ||
		!strings.Contains(err.Error(), `spec.volumes[3].ephemeral.persistentVolumeClaim "golden-pvc"`) {
		t.Fatalf("without disk.img: %v", err)
	}
	base := filepath.Join(mountDir, "golden", "disk.img")
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := prepareEphemeral(ctx, vmi, v, stateDir, mountDir, "spec.volumes[3]")
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(stateDir, "ephemeral-golden.qcow2") {
		t.Errorf("overlay at %s", path)
	}
	out, err := exec.Command("qemu-img", "info", "--output=json", "-U", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format": "qcow2"`, `"backing-filename": "` + base + `"`, `"backing-filename-format": "raw"`, `"virtual-size": 1048576`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	missing := v.DeepCopy()
	missing.Ephemeral.PersistentVolumeClaim = nil
	var invalid *InvalidVMIError
	if _, err := prepareEphemeral(ctx, vmi, missing, stateDir, mountDir, "spec.volumes[3]"); !errors.As(err, &invalid) {
		t.Errorf("no claim: %v, want an invalid VMI", err)
	}
}
