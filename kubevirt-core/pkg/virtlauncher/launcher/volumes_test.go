package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

const mib = 1 << 20

func claimInfo(capacity, request string) *kubevirtv1.PersistentVolumeClaimInfo {
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
		{name: "capacity", info: claimInfo("128Mi", ""), avail: plenty, want: 128 * mib},
		{name: "request", info: claimInfo("", "128Mi"), avail: plenty, want: 128 * mib},
		{name: "request below capacity", info: claimInfo("1Gi", "128Mi"), avail: plenty, want: 128 * mib},
		{name: "capacity below request", info: claimInfo("100Mi", "128Mi"), avail: plenty, want: 100 * mib},
		{name: "aligned down to 1MiB", info: claimInfo("100000000", ""), avail: plenty, want: 95 * mib},
		{name: "exactly what is free", info: claimInfo("64Mi", ""), avail: 64 * mib, want: 64 * mib},
		{name: "less space within the toleration", info: claimInfo("100Mi", ""), avail: 95*mib + 4096, want: 95 * mib},
		{name: "less space beyond the toleration", info: claimInfo("100Mi", ""), avail: 80 * mib, wantErr: "not enough space"},
		{name: "reserve exceeds the free space", info: claimInfo("100Mi", ""), avail: -4096, wantErr: "only 0 are free"},
		{name: "no size at all", info: claimInfo("", ""), avail: plenty, wantErr: "neither a capacity nor a request"},
		{name: "below 1MiB", info: claimInfo("512Ki", ""), avail: plenty, wantErr: "at least 1MiB"},
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
	fsMode, blockMode := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	withMode := func(info *kubevirtv1.PersistentVolumeClaimInfo, m *corev1.PersistentVolumeMode) *kubevirtv1.PersistentVolumeClaimInfo {
		info.VolumeMode = m
		return info
	}
	tests := []struct {
		name     string
		info     *kubevirtv1.PersistentVolumeClaimInfo
		noMount  bool
		existing []byte
		free     int64
		wantSize int64
		wantErr  string
	}{
		{name: "empty claim gets a sparse image", info: withMode(claimInfo("128Mi", "128Mi"), &fsMode), free: 1 << 40, wantSize: 128 * mib},
		{name: "volume mode left open means filesystem", info: claimInfo("64Mi", ""), free: 1 << 40, wantSize: 64 * mib},
		// The reserve comes off the free space, which then falls within the toleration.
		{name: "reserve kept free", info: claimInfo("64Mi", ""), free: 64 * mib, wantSize: 63 * mib},
		{name: "existing image kept as it is", info: claimInfo("128Mi", ""), existing: []byte("guest data"), free: 1 << 40, wantSize: 10},
		{name: "existing image needs no claim status", existing: []byte("guest data"), wantSize: 10},
		{name: "no claim status", free: 1 << 40, wantErr: "no claim to size"},
		{name: "block mode", info: withMode(claimInfo("128Mi", ""), &blockMode), free: 1 << 40, wantErr: "not supported"},
		{name: "claim not mounted", info: claimInfo("128Mi", ""), noMount: true, free: 1 << 40, wantErr: "no such file"},
		{name: "too little space", info: claimInfo("128Mi", ""), free: 64 * mib, wantErr: "not enough space"},
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
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}}
			available := func(d string) (int64, error) {
				if d != dir {
					t.Errorf("free space asked for %s, want the claim's mount %s", d, dir)
				}
				return tt.free, nil
			}

			path, err := preparePVCDisk(vmi, vol, mountDir, available)
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
				if b, _ := os.ReadFile(img); string(b) != string(tt.existing) {
					t.Errorf("existing image changed to %q", b)
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
