package virtlauncher

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/network"
)

// TestPodNetwork looks at the masquerade binding from outside the Pod: its eth0 holds the pod IP
// (a veth to this host here), and the Pod's resolv.conf names this host. The tiny guest gets its
// address from the launcher's DHCP server, serves on port 8080, which the host reaches at the pod
// IP, and reaches the host itself, seen as the pod IP; the launcher's exit removes the binding.
func TestPodNetwork(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pod, hostIP, podIP := podNamespace(t)

	// What the guest reaches out to: a listener on this host's end of the veth.
	ln, err := net.Listen("tcp", netip.AddrPortFrom(hostIP, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	outbound := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		outbound <- fmt.Sprintf("%s said %q", c.RemoteAddr().(*net.TCPAddr).IP, strings.TrimSpace(line))
	}()

	vmi := testVMI("net")
	// No MAC: the launcher derives one, and the DHCP server must know the guest by it.
	vmi.Spec.Domain.Devices.Interfaces[0].MacAddress = ""
	iface := &vmi.Spec.Domain.Devices.Interfaces[0]
	mac, err := network.GuestMAC(vmi, iface)
	if err != nil {
		t.Fatal(err)
	}
	// The script waits for udhcpc (which rcS starts in the background) to apply the lease (its
	// script writes resolv.conf last), prints what the guest got, serves on 8080 for good, and
	// reaches out to the host by ICMP and TCP.
	vmi.Spec.Volumes[1].CloudInitNoCloud.UserData = fmt.Sprintf(`#!/bin/sh
i=0
while ! grep -qs nameserver /etc/resolv.conf && [ $i -lt 120 ]; do i=$((i+1)); sleep 0.5; done
echo "NET-ADDR $(ip -4 -o addr show dev eth0 | awk '{print $4}')"
echo "NET-ROUTE $(ip route | grep default)"
echo "NET-DNS $(grep nameserver /etc/resolv.conf | head -n 1)"
nc -ll -p 8080 -e echo hi-from-guest &
ping -c 1 -W 10 %[1]s >/dev/null && echo NET-PING-OK
echo from-guest | nc %[1]s %[2]d
`, hostIP, ln.Addr().(*net.TCPAddr).Port)

	// The guest's DNS comes from the Pod's resolv.conf: one naming this host.
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte(fmt.Sprintf("nameserver %s\nsearch virt-launcher-test.svc.cluster.local\n", hostIP)), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l := startLauncher(ctx, t, vmi, img, launchOpts{netns: pod.NetNS, resolvConf: resolv})
	w := l.watch(ctx, t)
	st := l.sync(ctx, t, vmi)
	if want := []launcherapi.Interface{{Name: "default", MAC: mac.String()}}; fmt.Sprint(st.Interfaces) != fmt.Sprint(want) {
		t.Errorf("interfaces at start %+v, want %+v (no address before the lease)", st.Interfaces, want)
	}
	con := l.console(ctx, t)
	consoleHas(t, con, 150*time.Second,
		// udhcpc's script prints the lease it applied: the address came from our server.
		`D8V-GUEST-DHCP eth0 10\.0\.2\.2/24`,
		`NET-ADDR 10\.0\.2\.2/24`,
		`NET-ROUTE default via 10\.0\.2\.1 dev eth0`,
		`NET-DNS nameserver `+regexp.QuoteMeta(hostIP.String()),
	)
	t.Logf("guest has its lease %s after the start", time.Since(start).Round(time.Second))
	w.until(t, "the leased address in the status", func(st *launcherapi.DomainStatus) bool {
		return len(st.Interfaces) == 1 && slices.Equal(st.Interfaces[0].IPs, []string{"10.0.2.2"}) && st.Interfaces[0].MAC == mac.String()
	})

	t.Run("inbound to the pod IP", func(t *testing.T) {
		addr := netip.AddrPortFrom(podIP, 8080).String()
		if got := dialAnswer(t, nil, addr); got != "hi-from-guest" {
			t.Errorf("%s answered %q", addr, got)
		}
		// The Pod's own connections, as `kubectl port-forward` makes them.
		if got := dialAnswer(t, &pod, "127.0.0.1:8080"); got != "hi-from-guest" {
			t.Errorf("127.0.0.1:8080 in the Pod answered %q", got)
		}
	})
	t.Run("outbound from the guest", func(t *testing.T) {
		if _, err := con.WaitFor(regexp.MustCompile(`NET-PING-OK`), 30*time.Second); err != nil {
			t.Errorf("ping from the guest: %v", err)
		}
		select {
		case got := <-outbound:
			if want := fmt.Sprintf("%s said %q", podIP, "from-guest"); got != want {
				t.Errorf("host saw %s, want %s", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Error("the guest did not connect to the host")
		}
	})

	if _, err := con.WaitFor(readyLine, 60*time.Second); err != nil {
		t.Fatalf("ready marker: %v", err)
	}
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	final := w.final(t)
	if final.Result.Reason != string(launcher.ReasonShutdown) || final.Result.ExitCode != launcher.ExitStopped {
		t.Errorf("final status %+v, want Shutdown with exit 0", final.Result)
	}
	l.expectExit(t, launcher.ExitStopped, 30*time.Second)

	// The launcher removed its binding: the namespace is as the test made it.
	for _, link := range []string{network.BridgeName, network.TapName} {
		if out, err := exec.Command("ip", "-n", pod.NetNS, "link", "show", link).CombinedOutput(); err == nil {
			t.Errorf("%s left in the Pod's namespace: %s", link, out)
		}
	}
	f, err := os.Open(filepath.Join("/run/netns", pod.NetNS))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nft, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	if tables, err := nft.ListTables(); err != nil || len(tables) > 0 {
		t.Errorf("nftables tables left in the Pod's namespace: %d (%v)", len(tables), err)
	}
	if out, err := exec.Command("ip", "netns", "exec", pod.NetNS, "cat", "/proc/sys/net/ipv4/ip_forward").Output(); err != nil || string(bytes.TrimSpace(out)) != "0" {
		t.Errorf("ip_forward %q (%v), want it back at 0", out, err)
	}
}

// consoleHas waits until the console output matches every pattern, in any order: udhcpc's
// script and the user-data print concurrently.
func consoleHas(t *testing.T, con *guesttest.Console, timeout time.Duration, patterns ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := con.String()
		var missing []string
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(out) {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest console lacks %q after %s", missing, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// podCount tells the pod namespaces of one test binary apart.
var podCount atomic.Int32

// podNamespace makes a network namespace laid out like a Pod's on a node: eth0 with the pod IP
// and a default route to this host, over a veth of its own on 10.215.<x>.0/30 (x from the pid,
// so parallel test binaries differ; skipped while this host uses it). Both go at the end of the
// test.
func podNamespace(t *testing.T) (pod localnet.Host, hostIP, podIP netip.Addr) {
	t.Helper()
	suffix := fmt.Sprintf("%d%c", os.Getpid()%10000, 'a'+podCount.Add(1)%26)
	used := map[byte]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if v4 := ipn.IP.To4(); v4 != nil && v4[0] == 10 && v4[1] == 215 {
				used[v4[2]] = true
			}
		}
	}
	x := byte(os.Getpid()%200 + 20)
	for used[x] {
		x++
	}
	hostIP, podIP = netip.AddrFrom4([4]byte{10, 215, x, 1}), netip.AddrFrom4([4]byte{10, 215, x, 2})
	pod = localnet.Host{Name: "pod", NetNS: "d8vt-lpod-" + suffix, IP: podIP}
	hostEnd, podEnd := "d8vlh"+suffix, "d8vlp"+suffix
	ipCmd := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	cleanup := func() {
		if _, err := os.Stat(filepath.Join("/run/netns", pod.NetNS)); err == nil {
			if err := ipCmd("netns", "del", pod.NetNS); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		if _, err := net.InterfaceByName(hostEnd); err == nil {
			_ = ipCmd("link", "del", hostEnd)
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	for _, args := range [][]string{
		{"netns", "add", pod.NetNS},
		{"link", "add", hostEnd, "type", "veth", "peer", "name", podEnd, "netns", pod.NetNS},
		{"addr", "add", hostIP.String() + "/30", "dev", hostEnd},
		{"link", "set", hostEnd, "up"},
		{"-n", pod.NetNS, "link", "set", podEnd, "name", "eth0"},
		{"-n", pod.NetNS, "addr", "add", podIP.String() + "/30", "dev", "eth0"},
		{"-n", pod.NetNS, "link", "set", "eth0", "up"},
		{"-n", pod.NetNS, "link", "set", "lo", "up"},
		{"-n", pod.NetNS, "route", "add", "default", "via", hostIP.String()},
	} {
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	return pod, hostIP, podIP
}

// dialAnswer connects to addr from ns (nil: the test's namespace) until the guest's server
// answers (it starts late in the boot) and returns its first line.
func dialAnswer(t *testing.T, ns *localnet.Host, addr string) string {
	t.Helper()
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		var line string
		if line, err = firstLine(ns, addr, 10*time.Second); err == nil {
			return line
		}
	}
	t.Errorf("%s: %v", addr, err)
	return ""
}

// firstLine connects to addr from ns (nil: the test's namespace) and returns the first line the
// server sends, trimmed, waiting at most read for it.
func firstLine(ns *localnet.Host, addr string, read time.Duration) (string, error) {
	var line string
	dial := func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(read))
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	var err error
	if ns != nil {
		err = ns.Do(dial)
	} else {
		err = dial()
	}
	return strings.TrimSpace(line), err
}
