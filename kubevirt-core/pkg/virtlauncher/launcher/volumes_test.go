package launcher

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

const mib = 1 << 20

func pvcInfo(capacity, request string) *kubevirtv1.PersistentVolumeClaimInfo {
	info := &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "data"}
	if capacity != "" {
		info.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	if request != "" {
		info.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}
	}
	return info
}

func TestPVCImageSize(t *testing.T) {
	plenty := int64(1 << 40)
	tests := []struct {
		name    string
		info    *kubevirtv1.PersistentVolumeClaimInfo
		avail   int64
		want    int64
		wantErr string
	}{
		{name: "capacity", info: pvcInfo("128Mi", ""), avail: plenty, want: 128 * mib},
		{name: "request", info: pvcInfo("", "128Mi"), avail: plenty, want: 128 * mib},
		{name: "request below capacity", info: pvcInfo("1Gi", "128Mi"), avail: plenty, want: 128 * mib},
		{name: "capacity below request", info: pvcInfo("100Mi", "128Mi"), avail: plenty, want: 100 * mib},
		{name: "aligned down to 1MiB", info: pvcInfo("100000000", ""), avail: plenty, want: 95 * mib},
		{name: "exactly what is free", info: pvcInfo("64Mi", ""), avail: 64 * mib, want: 64 * mib},
		{name: "less space within the toleration", info: pvcInfo("100Mi", ""), avail: 95*mib + 4096, want: 95 * mib},
		{name: "less space beyond the toleration", info: pvcInfo("100Mi", ""), avail: 80 * mib, wantErr: "not enough space"},
		{name: "reserve exceeds the free space", info: pvcInfo("100Mi", ""), avail: -4096, wantErr: "only 0 are free"},
		{name: "no size at all", info: pvcInfo("", ""), avail: plenty, wantErr: "neither a capacity nor a request"},
		{name: "below 1MiB", info: pvcInfo("512Ki", ""), avail: plenty, wantErr: "at least 1MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pvcImageSize(tt.info, tt.avail)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %d, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestPreparePVCDisk(t *testing.T) {
	fsMode := corev1.PersistentVolumeFilesystem
	withMode := func(info *kubevirtv1.PersistentVolumeClaimInfo, m *corev1.PersistentVolumeMode) *kubevirtv1.PersistentVolumeClaimInfo {
		info.VolumeMode = m
		return info
	}
	tests := []struct {
		name     string
		info     *kubevirtv1.PersistentVolumeClaimInfo
		noMount  bool
		existing []byte
		expand   bool
		readOnly bool
		free     int64
		wantSize int64
		wantErr  string
	}{
		{name: "empty claim gets a sparse image", info: withMode(pvcInfo("128Mi", "128Mi"), &fsMode), free: 1 << 40, wantSize: 128 * mib},
		{name: "volume mode left open means filesystem", info: pvcInfo("64Mi", ""), free: 1 << 40, wantSize: 64 * mib},
		// The reserve comes off the free space, which then falls within the toleration.
		{name: "reserve kept free", info: pvcInfo("64Mi", ""), free: 64 * mib, wantSize: 63 * mib},
		{name: "existing image kept as it is", info: pvcInfo("128Mi", ""), existing: []byte("guest data"), free: 1 << 40, wantSize: 10},
		{name: "existing image needs no claim status", existing: []byte("guest data"), wantSize: 10},
		{name: "no claim status", free: 1 << 40, wantErr: "no claim to size"},
		{name: "claim not mounted", info: pvcInfo("128Mi", ""), noMount: true, free: 1 << 40, wantErr: "no such file"},
		{name: "too little space", info: pvcInfo("128Mi", ""), free: 64 * mib, wantErr: "not enough space"},
		// At a start, an image smaller than its claim grows to it; never shrinks.
		{name: "smaller image grows to its claim", info: pvcInfo("128Mi", ""), existing: []byte("guest data"), expand: true, free: 1 << 40, wantSize: 128 * mib},
		{name: "grows to the request below the capacity", info: pvcInfo("128Mi", "100Mi"), existing: []byte("guest data"), expand: true, free: 1 << 40, wantSize: 100 * mib},
		{name: "grows as far as the space goes", info: pvcInfo("128Mi", ""), existing: []byte("guest data"), expand: true, free: 64 * mib, wantSize: 63 * mib},
		{name: "a larger image is not cut", info: pvcInfo("1Mi", ""), existing: make([]byte, 2*mib), expand: true, free: 1 << 40, wantSize: 2 * mib},
		{name: "no claim status: kept", existing: []byte("guest data"), expand: true, wantSize: 10},
		{name: "a read-only claim's image is not grown", info: pvcInfo("1Mi", ""), existing: []byte("image"), expand: true, readOnly: true, free: 1 << 40, wantSize: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mountDir := t.TempDir()
			dir := filepath.Join(mountDir, "data")
			img := filepath.Join(dir, "disk.img")
			if !tt.noMount {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.existing != nil {
				if err := os.WriteFile(img, tt.existing, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if tt.info != nil {
				vmi.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "other"}, {Name: "data", PersistentVolumeClaimInfo: tt.info}}
			}
			vol := &kubevirtv1.Volume{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: tt.readOnly},
			}}}
			available := func(d string) (int64, error) {
				if d != dir {
					t.Errorf("free space asked for %s, want the claim's mount %s", d, dir)
				}
				return tt.free, nil
			}

			path, _, _, err := preparePVCDisk(vmi, vol, mountDir, tt.expand, available)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %s, %v; want an error with %q", path, err, tt.wantErr)
				}
				if _, err := os.Stat(img); tt.existing == nil && err == nil {
					t.Error("a failed preparation left disk.img behind")
				}
				return
			}
			if err != nil || path != img {
				t.Fatalf("got %s, %v; want %s", path, err, img)
			}
			fi, err := os.Stat(img)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != tt.wantSize {
				t.Errorf("disk.img has %d bytes, want %d", fi.Size(), tt.wantSize)
			}
			if tt.existing != nil {
				if b, _ := os.ReadFile(img); !bytes.Equal(b[:len(tt.existing)], tt.existing) || !bytes.Equal(b[len(tt.existing):], make([]byte, len(b)-len(tt.existing))) {
					t.Errorf("the existing image's data changed")
				}
			} else if st := fi.Sys().(*syscall.Stat_t); st.Blocks*512 >= fi.Size() {
				t.Errorf("disk.img takes %d bytes on disk: not sparse", st.Blocks*512)
			}
		})
	}
}

// TestDirBytesAvailable checks the free space against statfs's view of a real directory.
func TestDirBytesAvailable(t *testing.T) {
	got, err := dirBytesAvailable(t.TempDir())
	if err != nil || got <= 0 {
		t.Fatalf("got %d, %v; want the free bytes", got, err)
	}
	if _, err := dirBytesAvailable(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

func TestPrepareHostDisk(t *testing.T) {
	tests := []struct {
		name     string
		hd       kubevirtv1.HostDisk
		existing []byte
		expand   bool
		free     int64
		wantSize int64
		wantErr  string
		invalid  bool
	}{
		{name: "DiskOrCreate creates a sparse image", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("64Mi")},
			free: 1 << 40, wantSize: 64 * mib},
		{name: "DiskOrCreate keeps an existing image", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("64Mi")},
			existing: []byte("guest data"), wantSize: 10},
		{name: "Disk uses an existing image", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExists}, existing: []byte("guest data"), wantSize: 10},
		{name: "Disk does not create one", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExists}, wantErr: "no such file"},
		{name: "DiskOrCreate without capacity", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExistsOrCreate}, wantErr: "capacity: required", invalid: true},
		{name: "less space within the toleration", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("100Mi")},
			free: 96 * mib, wantSize: 95 * mib},
		{name: "not enough space", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExistsOrCreate, Capacity: resource.MustParse("100Mi")},
			free: 50 * mib, wantErr: "not enough space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mountDir := t.TempDir()
			// The Pod holds the directory of /srv/vm/disk.img at <mountDir>/host.
			dir := filepath.Join(mountDir, "host")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(dir, "disk.img")
			if tt.existing != nil {
				if err := os.WriteFile(img, tt.existing, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			hd := tt.hd
			hd.Path = "/srv/vm/disk.img"
			vol := &kubevirtv1.Volume{Name: "host", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &hd}}
			available := func(d string) (int64, error) {
				if d != dir {
					t.Errorf("free space asked for %s, want the mounted directory %s", d, dir)
				}
				return tt.free, nil
			}
			path, err := prepareHostDisk(vol, mountDir, "spec.volumes[2].hostDisk", available)
			if tt.wantErr != "" {
				var inv *InvalidVMIError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.As(err, &inv) != tt.invalid {
					t.Fatalf("got %s, %v; want an error with %q (invalid VMI: %v)", path, err, tt.wantErr, tt.invalid)
				}
				return
			}
			if err != nil || path != img {
				t.Fatalf("got %s, %v; want %s", path, err, img)
			}
			fi, err := os.Stat(img)
			if err != nil || fi.Size() != tt.wantSize {
				t.Fatalf("image: %v, %v; want %d bytes", fi, err, tt.wantSize)
			}
		})
	}
}

func TestCheckBlockDevice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, wantErr string }{
		{path: file, wantErr: "not a block device"},
		{path: "/dev/null", wantErr: "not a block device"},
		{path: filepath.Join(t.TempDir(), "missing"), wantErr: "no such file"},
	}
	// A loop device stands in for a real claim wherever one exists.
	if m, _ := filepath.Glob("/dev/loop[0-9]*"); len(m) > 0 {
		tests = append(tests, struct{ path, wantErr string }{path: m[0]})
	}
	for _, tt := range tests {
		err := checkBlockDevice(tt.path)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: %v, want error %q", tt.path, err, tt.wantErr)
		}
	}
}

func TestPrepareCloudInit(t *testing.T) {
	if _, err := exec.LookPath("isoinfo"); err != nil {
		t.Skip("isoinfo is not installed")
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace, vmi.UID = "vm1", "ns1", "uid-1"
	tests := []struct {
		name     string
		src      kubevirtv1.VolumeSource
		wantFile string
		wantISO  map[string]string // path on the ISO -> content
		wantErr  string
	}{
		{
			name:     "NoCloud",
			src:      kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#!/bin/sh\n"}},
			wantFile: "noCloud-ci.iso",
			wantISO:  map[string]string{"/user-data": "#!/bin/sh\n", "/meta-data": "instance-id: ns1.vm1\nlocal-hostname: vm1\n"},
		},
		{
			name:     "ConfigDrive carries the domain's UUID",
			src:      kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserData: "#!/bin/sh\n"}},
			wantFile: "configDrive-ci.iso",
			wantISO: map[string]string{"/openstack/latest/user_data": "#!/bin/sh\n",
				"/openstack/latest/meta_data.json": `{"instance_id":"vm1.ns1","hostname":"vm1","uuid":"` + converter.DomainUUID(vmi) + `"}`},
		},
		{
			name:    "invalid data is the VMI's fault",
			src:     kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserDataBase64: "!!"}},
			wantErr: "spec.volumes[1].cloudInitConfigDrive.userDataBase64",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, err := prepareCloudInit(context.Background(), dir, vmi, &kubevirtv1.Volume{Name: "ci", VolumeSource: tt.src}, "spec.volumes[1]")
			if tt.wantErr != "" {
				var inv *InvalidVMIError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &inv) {
					t.Fatalf("got %s, %v; want an invalid VMI error with %q", path, err, tt.wantErr)
				}
				return
			}
			if err != nil || path != filepath.Join(dir, tt.wantFile) {
				t.Fatalf("got %s, %v; want %s", path, err, tt.wantFile)
			}
			for name, want := range tt.wantISO {
				if out, _ := exec.Command("isoinfo", "-R", "-i", path, "-x", name).Output(); string(out) != want {
					t.Errorf("%s holds %q, want %q", name, out, want)
				}
			}
		})
	}
}
