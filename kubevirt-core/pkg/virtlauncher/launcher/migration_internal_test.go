package launcher

import (
	"bufio"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

func TestPlanDisks(t *testing.T) {
	const xml = `<domain type='qemu'><name>x</name><devices>
<disk type='file' device='disk'><source file='/s/disk-root.qcow2'/><target dev='vda' bus='virtio'/><alias name='ua-root'/></disk>
<disk type='file' device='disk'><source file='/s/noCloud-ci.iso'/><target dev='vdb' bus='virtio'/><readonly/><alias name='ua-ci'/></disk>
<disk type='file' device='disk'><source file='/pvc/data/disk.img'/><target dev='vdc' bus='virtio'/><alias name='ua-data'/></disk>
<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'/><source file='/pvc/direct/disk.img'/><target dev='vdf' bus='virtio'/><alias name='ua-direct'/></disk>
<disk type='file' device='disk'><source file='/s/empty-scratch.qcow2'/><target dev='vdd' bus='virtio'/><alias name='ua-scratch'/></disk>
<disk type='file' device='cdrom'><target dev='sda' bus='sata'/><readonly/></disk>
<disk type='file' device='disk'><source file='/s/ephemeral-golden.qcow2'/><target dev='vde' bus='virtio'/><alias name='ua-golden'/></disk>
<disk type='file' device='cdrom'><source file='/s/configMap-cm.iso'/><target dev='sdb' bus='sata'/><readonly/><alias name='ua-cm'/></disk>
</devices></domain>`
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Spec.Volumes = []kubevirtv1.Volume{
		{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img"}}},
		{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{}}},
		{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}},
		{Name: "direct", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}},
		{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{}}},
		{Name: "golden", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{}}},
		{Name: "cm", VolumeSource: kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{}}},
	}
	for _, tc := range []struct {
		name string
		xml  string
		vmi  *kubevirtv1.VirtualMachineInstance
		want diskPlan
		err  bool
	}{
		{name: "overlays and scratch disks travel; the claims and the ISO stay, the cached claim is unsafe", xml: xml, vmi: vmi,
			want: diskPlan{Copy: []string{"vda", "vdd", "vde"}, SharedCached: []string{"vdc"}}},
		{name: "no VMI: nothing is known to be local", xml: xml, want: diskPlan{SharedCached: []string{"vda", "vdc", "vdd", "vde"}}},
		{name: "no devices", xml: `<domain type='qemu'><name>x</name></domain>`, vmi: vmi},
		{name: "bad XML", xml: `<domain`, vmi: vmi, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planDisks(tc.xml, tc.vmi)
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestMigrationRequest(t *testing.T) {
	p := MigrationParams{UID: "m", TargetAddress: "10.213.0.9", Ports: launcherapi.DefaultMigrationPorts}
	for _, tc := range []struct {
		name      string
		p         MigrationParams
		disks     diskPlan
		dconn     string
		uri       string
		flags     libvirt.DomainMigrateFlags
		bandwidth uint64
	}{
		{
			name: "with local disks", p: p, disks: diskPlan{Copy: []string{"vda"}},
			dconn: "qemu+tcp://10.213.0.9:22222/system", uri: "tcp://10.213.0.9:49152",
			flags: libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_ABORT_ON_ERROR | libvirt.MIGRATE_NON_SHARED_INC,
		},
		{
			name: "a shared disk the host caches", p: p, disks: diskPlan{SharedCached: []string{"vda"}},
			dconn: "qemu+tcp://10.213.0.9:22222/system", uri: "tcp://10.213.0.9:49152",
			flags: libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_ABORT_ON_ERROR | libvirt.MIGRATE_UNSAFE,
		},
		{
			name: "memory only, limited, IPv6", p: MigrationParams{UID: "m", TargetAddress: "fd00::9", Ports: launcherapi.DefaultMigrationPorts, BandwidthMiB: 32},
			dconn: "qemu+tcp://[fd00::9]:22222/system", uri: "tcp://[fd00::9]:49152",
			flags: libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_ABORT_ON_ERROR, bandwidth: 32,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dconn, params, flags := migrationRequest(tc.p, tc.disks)
			if dconn != tc.dconn || params.URI != tc.uri || !params.URISet || flags != tc.flags {
				t.Errorf("got %s %s %#x, want %s %s %#x", dconn, params.URI, flags, tc.dconn, tc.uri, tc.flags)
			}
			copied := tc.disks.Copy
			if params.MigrateDisksSet != (len(copied) > 0) || !reflect.DeepEqual(params.MigrateDisks, copied) ||
				params.DisksPortSet != (len(copied) > 0) || (len(copied) > 0 && params.DisksPort != 49153) {
				t.Errorf("disks %v %v port %v %d", params.MigrateDisksSet, params.MigrateDisks, params.DisksPortSet, params.DisksPort)
			}
			if params.BandwidthSet != (tc.bandwidth > 0) || params.Bandwidth != tc.bandwidth {
				t.Errorf("bandwidth %v %d", params.BandwidthSet, params.Bandwidth)
			}
		})
	}
}

func TestMigrationParamsValidate(t *testing.T) {
	good := MigrationParams{UID: "m", TargetAddress: "10.213.0.9", Ports: launcherapi.DefaultMigrationPorts}
	for _, tc := range []struct {
		name string
		mut  func(*MigrationParams)
		ok   bool
	}{
		{name: "good", mut: func(*MigrationParams) {}, ok: true},
		{name: "no UID", mut: func(p *MigrationParams) { p.UID = "" }},
		{name: "no address", mut: func(p *MigrationParams) { p.TargetAddress = "" }},
		{name: "address with a path", mut: func(p *MigrationParams) { p.TargetAddress = "h/x" }},
		{name: "no block port", mut: func(p *MigrationParams) { p.Ports.Block = 0 }},
		{name: "port out of range", mut: func(p *MigrationParams) { p.Ports.Libvirt = 70000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := good
			tc.mut(&p)
			if err := p.validate(); (err == nil) != tc.ok {
				t.Errorf("validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestLanded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  libvirt.DomainState
		reason int
		want   bool
	}{
		{"paused while the stream comes in", libvirt.DOMAIN_PAUSED, int(libvirt.DOMAIN_PAUSED_MIGRATION), false},
		{"starting up", libvirt.DOMAIN_PAUSED, int(libvirt.DOMAIN_PAUSED_STARTING_UP), false},
		{"resumed after the migration", libvirt.DOMAIN_RUNNING, int(libvirt.DOMAIN_RUNNING_MIGRATED), true},
		{"paused as it was on the source", libvirt.DOMAIN_PAUSED, int(libvirt.DOMAIN_PAUSED_USER), true},
		{"gone", libvirt.DOMAIN_SHUTOFF, int(libvirt.DOMAIN_SHUTOFF_FAILED), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := landed(tc.state, tc.reason); got != tc.want {
				t.Errorf("landed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJobWatch(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const gib = 1 << 30
	type sample struct {
		at        time.Duration
		total     uint64
		remaining uint64
		abort     string // substring of the reason; empty: go on
	}
	for _, tc := range []struct {
		name    string
		samples []sample
	}{
		{name: "progressing", samples: []sample{{time.Second, gib, gib / 2, ""}, {100 * time.Second, gib, gib / 4, ""}, {200 * time.Second, 2 * gib, gib / 8, ""}}},
		{name: "stuck", samples: []sample{{time.Second, gib, gib / 2, ""}, {100 * time.Second, gib, gib / 2, ""}, {151 * time.Second, gib, gib / 2, "no progress"}}},
		{name: "dirtying as fast as it sends", samples: []sample{{time.Second, gib, gib / 2, ""}, {140 * time.Second, gib, gib/2 - 1, ""}, {291 * time.Second, gib, gib/2 + 5, "no progress"}}},
		{name: "too slow for its size", samples: []sample{{10 * time.Second, 3 * gib / 2, gib, ""}, {140 * time.Second, 3 * gib / 2, gib - 1, ""}, {260 * time.Second, 3 * gib / 2, gib - 2, ""}, {300 * time.Second, 3 * gib / 2, gib - 3, "not completed within 5m0s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &jobWatch{start: start}
			for _, s := range tc.samples {
				got := w.check(start.Add(s.at), s.total, s.remaining)
				if (got == "") != (s.abort == "") || !strings.Contains(got, s.abort) {
					t.Fatalf("at %s: %q, want %q", s.at, got, s.abort)
				}
			}
		})
	}
}

func TestLibvirtSocket(t *testing.T) {
	for uri, want := range map[string]string{
		"qemu+unix:///system?socket=/run/libvirt/libvirt-sock": "/run/libvirt/libvirt-sock",
		"qemu+unix:///system?socket=/tmp/x/sock":               "/tmp/x/sock",
		"qemu:///system":                                       "/run/libvirt/libvirt-sock",
	} {
		if got := libvirtSocket(uri); got != want {
			t.Errorf("libvirtSocket(%q) = %q, want %q", uri, got, want)
		}
	}
}

// TestProxy relays TCP to a unix socket both ways; closing the listener keeps a relayed
// connection, Close cuts it.
func TestProxy(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte("echo " + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	p, err := listenProxy("127.0.0.1:0", sock, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(msg string) error {
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if got != "echo "+msg+"\n" {
			t.Errorf("got %q", got)
		}
		return nil
	}
	if err := roundTrip("one"); err != nil {
		t.Fatal(err)
	}
	p.CloseListener()
	if _, err := net.DialTimeout("tcp", p.Addr().String(), time.Second); err == nil {
		t.Error("a new connection after CloseListener")
	}
	if err := roundTrip("two"); err != nil {
		t.Fatalf("the relayed connection broke with the listener: %v", err)
	}
	p.Close()
	if err := roundTrip("three"); err == nil {
		t.Error("the relayed connection survived Close")
	}
}
