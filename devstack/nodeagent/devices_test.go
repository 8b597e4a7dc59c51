package nodeagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

func TestDeviceMounts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{"file": file, "char": "/dev/null"}
	type testCase struct {
		name    string
		devices []corev1.VolumeDevice
		want    []Mount
		wantErr string
	}
	tests := []testCase{
		{name: "none"},
		{name: "unknown volume", devices: []corev1.VolumeDevice{{Name: "x", DevicePath: "/dev/x"}}, wantErr: `volumeDevice "x": no such volume`},
		{name: "regular file", devices: []corev1.VolumeDevice{{Name: "file", DevicePath: "/dev/file"}}, wantErr: "not a block device"},
		{name: "character device", devices: []corev1.VolumeDevice{{Name: "char", DevicePath: "/dev/char"}}, wantErr: "not a block device"},
	}
	// A loop device stands in for a block claim wherever one exists.
	if m, _ := filepath.Glob("/dev/loop[0-9]*"); len(m) > 0 {
		paths["blk"] = m[0]
		tests = append(tests,
			testCase{name: "block device", devices: []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/disk0/"}},
				want: []Mount{{Source: m[0], Target: "/dev/disk0"}}},
			testCase{name: "relative device path", devices: []corev1.VolumeDevice{{Name: "blk", DevicePath: "dev/disk0"}}, wantErr: "not absolute"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := deviceMounts(&corev1.Container{VolumeDevices: tt.devices}, paths)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// privateDevChild marks the re-executed test binary that runs privateDev in a mount namespace of
// its own.
const privateDevChild = "D8V_TEST_PRIVATE_DEV_CHILD"

// TestPrivateDev runs privateDev in a new mount namespace (a child process) and checks that the
// host's devices and devpts are there, and that a file made in the private /dev stays out of the
// host's.
func TestPrivateDev(t *testing.T) {
	if probe := os.Getenv(privateDevChild); probe != "" {
		runPrivateDevChild(t, probe)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespaces")
	}
	probe := "d8v-private-dev-test-" + filepath.Base(t.TempDir())
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrivateDev$", "-test.v")
	cmd.Env = append(os.Environ(), privateDevChild+"="+probe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestPrivateDev") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := os.Lstat(filepath.Join("/dev", probe)); err == nil {
		os.Remove(filepath.Join("/dev", probe))
		t.Fatalf("/dev/%s leaked into the host's /dev", probe)
	}
}

func runPrivateDevChild(t *testing.T, probe string) {
	// As container-init does: nothing mounted here may reach the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		t.Fatal(err)
	}
	if err := privateDev(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat("/dev/null"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("/dev/null: %v, %v; want the host's device", fi, err)
	}
	if fi, err := os.Lstat("/dev/stdin"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("/dev/stdin: %v, %v; want the host's symlink", fi, err)
	}
	// devpts comes along with its directory: a new pty shows up in it.
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/dev/pts", strconv.Itoa(n))); err != nil {
		t.Errorf("new pty: %v", err)
	}
	if err := os.WriteFile(filepath.Join("/dev", probe), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
