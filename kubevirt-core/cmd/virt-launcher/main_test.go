package main

import (
	"os"
	"os/exec"
	"testing"
)

// runAsLauncher makes the test binary act as virt-launcher, so the tests run the real command
// (flags, exit codes) without building it first. The launcher's guest tests build and run the
// binary itself: devstack/test/virt-launcher.
const runAsLauncher = "D8V_TEST_RUN_VIRT_LAUNCHER"

func TestMain(m *testing.M) {
	if os.Getenv(runAsLauncher) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// privateLibvirt is how a Pod's container runs the launcher: in a mount namespace with private
// libvirt directories (a writable copy of the host's /etc/libvirt). It returns the command
// prefix and environment that put a launcher there.
func privateLibvirt(t *testing.T) (wrap, env []string) {
	t.Helper()
	for _, bin := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found", bin)
		}
	}
	seed := t.TempDir()
	if _, err := os.Stat("/etc/libvirt"); err == nil {
		if out, err := exec.Command("cp", "-a", "/etc/libvirt/.", seed).CombinedOutput(); err != nil {
			t.Fatalf("seed /etc/libvirt: %v: %s", err, out)
		}
	}
	// Propagation "slave": the namespace's mounts stay in it; /tmp is shared.
	const script = `set -e
for d in /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt; do
	mkdir -p "$d"
	mount -t tmpfs tmpfs "$d"
done
mkdir -p /etc/libvirt
mount --bind "$D8V_TEST_SEED" /etc/libvirt
exec "$@"
`
	return []string{"unshare", "--mount", "--propagation", "slave", "--", "/bin/sh", "-c", script, "sh"},
		[]string{"D8V_TEST_SEED=" + seed}
}

// TestFlags: the launcher runs only as a Pod's container runs it; it needs the VMI's identity.
func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"--name", "vm", "--namespace", "ns", "--uid", "u", "--grace-period-seconds", "75"})
	if err != nil || o.name != "vm" || o.namespace != "ns" || o.uid != "u" || o.grace != 75 {
		t.Fatalf("parseFlags = %+v, %v", o, err)
	}
	if res := serve(&options{}, nil); res.ExitCode != 1 {
		t.Errorf("without --name, --namespace and --uid: %+v, want exit 1", res)
	}
}
