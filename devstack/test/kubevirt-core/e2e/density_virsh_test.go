package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/devstack/libvirtd"
)

// The bare start: the domain of one of the batch's running guests, as its launcher's libvirtd has
// it, started densityVMs times at once by `virsh start` in one libvirtd of the machine (its QEMU
// capabilities cached, as a host that runs guests has them). That is the floor under a VM start:
// QEMU and libvirt, without the API, the controllers, the node's Pod start or the launcher.

// launcherDomain finds a libvirtd of a launcher that runs a domain of namespace ns (domains are
// named <namespace>_<name>) and returns its pid and the domain's live XML.
func launcherDomain(ctx context.Context, ns string) (pid int, xml string, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, "", err
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); strings.TrimSpace(string(comm)) != "libvirtd" {
			continue
		}
		uri := launcherURI(p)
		out, err := exec.CommandContext(ctx, "virsh", "-q", "-c", uri, "list", "--name").Output()
		if err != nil {
			continue // a daemon of something else, or going away
		}
		for _, dom := range strings.Fields(string(out)) {
			if strings.HasPrefix(dom, ns+"_") {
				x, err := exec.CommandContext(ctx, "virsh", "-q", "-c", uri, "dumpxml", dom).Output()
				if err != nil {
					return 0, "", fmt.Errorf("dumpxml %s: %w", dom, err)
				}
				return p, string(x), nil
			}
		}
	}
	return 0, "", fmt.Errorf("no launcher's libvirtd runs a domain of %s", ns)
}

// launcherURI reaches the libvirtd of pid through its mount namespace's socket.
func launcherURI(pid int) string {
	return fmt.Sprintf("qemu+unix:///system?socket=/proc/%d/root/run/libvirt/libvirt-sock", pid)
}

// bareDomains are copies of a launcher's domain for the bare start, with their files in dir.
type bareDomains struct {
	dir  string
	xmls []string
}

// prepareBareDomains copies what the launcher's domain (of libvirtd pid) reads into dir: its
// containerDisk's base image once, an overlay of it per copy, the other files (the cloud-init
// ISO) per copy; the sockets and logs of each copy are in dir too. The network interface is
// left out: its tap device lives in the launcher Pod's network namespace.
func prepareBareDomains(ctx context.Context, pid int, liveXML, dir string, n int) (*bareDomains, error) {
	var base string
	out := &bareDomains{dir: dir}
	for i := 0; i < n; i++ {
		dom := &libvirtxml.Domain{}
		if err := dom.Unmarshal(liveXML); err != nil {
			return nil, fmt.Errorf("the launcher's domain: %w", err)
		}
		vmDir := filepath.Join(dir, fmt.Sprintf("vm-%d", i))
		if err := os.MkdirAll(vmDir, 0o755); err != nil {
			return nil, err
		}
		dom.ID, dom.UUID, dom.Name = nil, "", fmt.Sprintf("bare-%d", i)
		dom.SecLabel = nil
		dom.Devices.Interfaces = nil
		for j := range dom.Devices.Disks {
			d := &dom.Devices.Disks[j]
			if d.Source == nil || d.Source.File == nil {
				continue
			}
			file := filepath.Join(vmDir, filepath.Base(d.Source.File.File))
			if bs := d.BackingStore; bs != nil && bs.Source != nil && bs.Source.File != nil {
				// The backing file is named as the launcher opened it (/proc/<pid>/fd/<n> of a
				// containerDisk process), which the host reads too.
				if base == "" {
					base = filepath.Join(dir, "base.qcow2")
					if err := copyFromLauncher(ctx, pid, bs.Source.File.File, base); err != nil {
						return nil, fmt.Errorf("the containerDisk: %w", err)
					}
				}
				if o, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, file).CombinedOutput(); err != nil {
					return nil, fmt.Errorf("overlay: %w: %s", err, o)
				}
			} else if err := copyFromLauncher(ctx, pid, d.Source.File.File, file); err != nil {
				return nil, err
			}
			d.Source.File.File, d.Source.Index, d.BackingStore = file, 0, nil
		}
		socket := filepath.Join(vmDir, "serial.sock")
		for _, src := range chardevSources(dom) {
			if src.UNIX != nil {
				src.UNIX.Path = socket
			}
		}
		for j := range dom.Devices.Serials {
			if l := dom.Devices.Serials[j].Log; l != nil {
				l.File = filepath.Join(vmDir, "serial.log")
			}
		}
		for j := range dom.Devices.Consoles {
			if l := dom.Devices.Consoles[j].Log; l != nil {
				l.File = filepath.Join(vmDir, "serial.log")
			}
		}
		for j := range dom.Devices.Channels {
			// libvirt names the guest agent's socket itself.
			if s := dom.Devices.Channels[j].Source; s != nil && s.UNIX != nil {
				s.UNIX.Path = ""
			}
			if t := dom.Devices.Channels[j].Target; t != nil && t.VirtIO != nil {
				t.VirtIO.State = ""
			}
		}
		for j := range dom.Devices.Graphics {
			if v := dom.Devices.Graphics[j].VNC; v != nil {
				v.Socket = filepath.Join(vmDir, "vnc.sock")
				for k := range v.Listeners {
					if v.Listeners[k].Socket != nil {
						v.Listeners[k].Socket.Socket = v.Socket
					}
				}
			}
		}
		x, err := dom.Marshal()
		if err != nil {
			return nil, err
		}
		out.xmls = append(out.xmls, x)
	}
	return out, nil
}

// chardevSources are the sources of the serial ports and consoles.
func chardevSources(dom *libvirtxml.Domain) []*libvirtxml.DomainChardevSource {
	var out []*libvirtxml.DomainChardevSource
	for j := range dom.Devices.Serials {
		if s := dom.Devices.Serials[j].Source; s != nil {
			out = append(out, s)
		}
	}
	for j := range dom.Devices.Consoles {
		if s := dom.Devices.Consoles[j].Source; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// copyFromLauncher copies a file as the libvirtd of pid names it (in the launcher's mount
// namespace, whose symlinks /proc/<pid>/root would resolve against the host's root; a
// /proc/<pid>/fd/<n> link of a containerDisk process is the host's too, one pid namespace) to dst.
func copyFromLauncher(ctx context.Context, pid int, p, dst string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(pid), "--mount", "--", "cat", p)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		out.Close()
		return fmt.Errorf("copy %s from the launcher: %w: %s", p, err, stderr.String())
	}
	return out.Close()
}

// bareResult is what the bare start measured: start-to-running latencies (virsh start returns
// once QEMU runs the guest) and the CPU.
type bareResult struct {
	p50, p95 time.Duration
	cpu      cpuCost
}

// startBare defines the domains in a libvirtd of the machine's own (devstack/libvirtd, a private
// instance for the benchmark), starts them all at once and destroys them again.
func startBare(ctx context.Context, doms *bareDomains) (bareResult, error) {
	opts := libvirtd.Options{StateDir: libvirtd.StateDirFor("bench-bare")}
	d, err := libvirtd.Start(ctx, opts)
	if err != nil {
		return bareResult{}, err
	}
	defer func() { _ = libvirtd.Stop(context.Background(), opts) }()
	virsh := func(args ...string) error {
		out, err := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", d.URI}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	// A host that runs guests has probed its QEMU long before.
	if err := virsh("domcapabilities", "--virttype", "qemu"); err != nil {
		return bareResult{}, err
	}
	for i, x := range doms.xmls {
		f := filepath.Join(doms.dir, fmt.Sprintf("vm-%d.xml", i))
		if err := os.WriteFile(f, []byte(x), 0o644); err != nil {
			return bareResult{}, err
		}
		if err := virsh("define", f); err != nil {
			return bareResult{}, err
		}
	}
	defer func() {
		for i := range doms.xmls {
			_ = virsh("destroy", fmt.Sprintf("bare-%d", i))
			_ = virsh("undefine", fmt.Sprintf("bare-%d", i))
		}
	}()
	before, err := readCPU("/proc")
	if err != nil {
		return bareResult{}, err
	}
	lat := make([]time.Duration, len(doms.xmls))
	errs := make([]error, len(doms.xmls))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range doms.xmls {
		wg.Go(func() {
			errs[i] = virsh("start", fmt.Sprintf("bare-%d", i))
			lat[i] = time.Since(start)
		})
	}
	wg.Wait()
	after, err := readCPU("/proc")
	if err != nil {
		return bareResult{}, err
	}
	for _, err := range errs {
		if err != nil {
			return bareResult{}, err
		}
	}
	sort.Slice(lat, func(x, y int) bool { return lat[x] < lat[y] })
	return bareResult{p50: lat[len(lat)/2], p95: lat[(len(lat)*95+99)/100-1], cpu: costSince(before, after, len(lat))}, nil
}

// bareStart measures the bare start of the domain of a running guest of ns: the files are taken
// while the guest runs (call it before the batch is deleted), the start happens in run.
func bareStart(b *testing.B, ctx context.Context, ns string) (run func() bareResult) {
	b.Helper()
	pid, xml, err := launcherDomain(ctx, ns)
	if err != nil {
		b.Fatal(err)
	}
	doms, err := prepareBareDomains(ctx, pid, xml, b.TempDir(), *densityVMs)
	if err != nil {
		b.Fatal(err)
	}
	return func() bareResult {
		r, err := startBare(ctx, doms)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
}
