package virtlauncher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/network"
)

// childEnv makes the test binary act as a launcher that only sets up the binding: it runs Setup
// in its (the Pod's) namespace, prints "ready", and tears down when its stdin closes.
const childEnv = "D8V_TEST_NETWORK_CHILD"

// childConfig is the part of Config the test chooses.
type childConfig struct {
	MAC        string         `json:"mac"`
	Ports      []network.Port `json:"ports"`
	Hostname   string         `json:"hostname"`
	Subdomain  string         `json:"subdomain"`
	Namespace  string         `json:"namespace"`
	ResolvConf string         `json:"resolvConf"`
}

func child(raw string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		log.Error("child config", "err", err)
		return 1
	}
	mac, err := net.ParseMAC(c.MAC)
	if err != nil {
		log.Error("child config", "err", err)
		return 1
	}
	p, err := network.Setup(context.Background(), network.Config{
		NIC:        network.NIC{Name: "default", MAC: mac, Ports: c.Ports, Hostname: c.Hostname, Subdomain: c.Subdomain, Namespace: c.Namespace},
		ResolvConf: c.ResolvConf,
		OnLease:    func() { fmt.Println("lease") },
		Logger:     log,
	})
	if err != nil {
		log.Error("setup", "err", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := p.Close(); err != nil {
		log.Error("teardown", "err", err)
		return 1
	}
	fmt.Println("closed")
	return 0
}

// TestPodNetworkBinding runs network.Setup in a network namespace laid out like a Pod's (eth0 with the pod IP,
// a veth to this host), with a second namespace standing in for the guest: a veth on the
// launcher's bridge with the guest's MAC. It checks the DHCP exchange, the forwarding of the pod
// IP's ports to the guest (all, then only declared ones), the guest's masqueraded outbound
// connections, the Pod's own connections to its IP and to 127.0.0.1, that a launcher killed
// without teardown is replaced, and that teardown leaves the namespace as it found it.
func TestPodNetworkBinding(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := newTestNet(t, 214)
	pod, guest := n.pod, n.guest
	const mac = "02:d8:76:00:00:07"

	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte(fmt.Sprintf("nameserver 127.0.0.53\nnameserver %s\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\n", n.hostIP)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := childConfig{MAC: mac, Hostname: "vm1", Subdomain: "sub", Namespace: "ns1", ResolvConf: resolv}

	// The guest: a veth whose other end goes on the launcher's bridge once it exists.
	guestEnd, bridgePort := "d8vg"+n.suffix, "d8vb"+n.suffix
	mustIP(t, "link", "add", guestEnd, "netns", guest.NetNS, "address", mac, "type", "veth", "peer", "name", bridgePort, "netns", pod.NetNS)
	mustIP(t, "-n", guest.NetNS, "link", "set", guestEnd, "name", "eth0", "up")
	mustIP(t, "-n", guest.NetNS, "link", "set", "lo", "up")

	// A launcher that dies without tearing down leaves everything behind; the next one replaces it.
	first := startChild(ctx, t, pod, cfg)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	// It also left forwarding on; the next launcher cannot know it was off before, so the test
	// turns it off to see the teardown restore what Setup found.
	if out, err := exec.Command("ip", "netns", "exec", pod.NetNS, "sh", "-c", "echo 0 >/proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		t.Fatalf("reset ip_forward: %v: %s", err, out)
	}

	l := startChild(ctx, t, pod, cfg)
	mustIP(t, "-n", pod.NetNS, "link", "set", bridgePort, "master", network.BridgeName, "up")

	// Nothing of the binding may have leaked into the test's own namespace.
	if _, err := net.InterfaceByName(network.BridgeName); err == nil {
		t.Fatalf("%s exists in the test's namespace", network.BridgeName)
	}

	ack := dhcpExchange(t, guest, mac)
	if got, want := ack.YIAddr, network.GuestPrefix.Addr(); got != want {
		t.Errorf("leased %s, want %s", got, want)
	}
	for _, c := range []struct {
		code byte
		want []byte
	}{
		{network.OptSubnetMask, []byte{255, 255, 255, 0}},
		{network.OptRouter, []byte{10, 0, 2, 1}},
		// The loopback resolver is of no use behind the NAT.
		{network.OptDNS, n.hostIP.AsSlice()},
		{network.OptHostname, []byte("vm1")},
		{network.OptInterfaceMTU, []byte{0x05, 0xdc}},
	} {
		if got := ack.Options[c.code]; !bytes.Equal(got, c.want) {
			t.Errorf("option %d = %v, want %v", c.code, got, c.want)
		}
	}
	if search, err := network.DecodeDomainList(ack.Options[network.OptDomainSearch]); err != nil || len(search) == 0 || search[0] != "sub.ns1.svc.cluster.local" {
		t.Errorf("search list %q (%v), want the guest's own domain first", search, err)
	}
	l.waitLine(t, "lease")

	// The guest takes its lease as udhcpc's script would.
	mustIP(t, "-n", guest.NetNS, "addr", "add", network.GuestPrefix.String(), "dev", "eth0")
	mustIP(t, "-n", guest.NetNS, "route", "add", "default", "via", network.GatewayPrefix.Addr().String())
	serveTCP(t, guest, ":8080", "guest-8080")
	serveTCP(t, guest, ":8081", "guest-8081")
	serveUDP(t, guest, ":5353")

	podAddr := func(port int) string { return netip.AddrPortFrom(n.podIP, uint16(port)).String() }
	t.Run("all ports", func(t *testing.T) {
		// The guest sees the real client address.
		expectAnswer(t, nil, podAddr(8080), "guest-8080 from "+n.hostIP.String())
		expectAnswer(t, nil, podAddr(8081), "guest-8081 from "+n.hostIP.String())
		expectUDPEcho(t, podAddr(5353))
		// The Pod's own connections: to its IP they keep the pod IP as source; from loopback
		// they come SNATed to the gateway.
		expectAnswer(t, &pod, podAddr(8080), "guest-8080 from "+n.podIP.String())
		expectAnswer(t, &pod, "127.0.0.1:8080", "guest-8080 from 10.0.2.1")
	})

	t.Run("guest reaches out as the pod IP", func(t *testing.T) {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(n.hostIP, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		from := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				from <- err.Error()
				return
			}
			defer c.Close()
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			from <- host
		}()
		if err := guest.Do(func() error {
			c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}); err != nil {
			t.Fatalf("guest dial: %v", err)
		}
		select {
		case got := <-from:
			if got != n.podIP.String() {
				t.Errorf("the host saw the guest as %s, want the pod IP %s", got, n.podIP)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no connection from the guest")
		}
	})

	l.stop(t)
	assertClean(t, pod)

	t.Run("declared ports only", func(t *testing.T) {
		cfg := cfg
		cfg.Ports = []network.Port{{Protocol: network.TCP, Port: 8080}}
		l := startChild(ctx, t, pod, cfg)
		mustIP(t, "-n", pod.NetNS, "link", "set", bridgePort, "master", network.BridgeName, "up")
		expectAnswer(t, nil, podAddr(8080), "guest-8080 from "+n.hostIP.String())
		// Nothing in the Pod listens on 8081: refused by the Pod itself, the guest never sees it.
		if c, err := net.DialTimeout("tcp", podAddr(8081), 3*time.Second); err == nil {
			c.Close()
			t.Error("port 8081 reached something although only 8080 is declared")
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial 8081: %v, want connection refused", err)
		}
		l.stop(t)
		assertClean(t, pod)
	})
}

// testNet is a Pod-like namespace (eth0 with the pod IP, default route to this host over a
// veth) and a guest namespace, removed at the end of the test.
type testNet struct {
	suffix        string
	pod, guest    localnet.Host
	hostIP, podIP netip.Addr
}

// newTestNet lays out the namespaces on 10.<second>.<x>.0/30, x picked from the pid so that
// parallel test binaries differ, and checked to be unused on this host.
func newTestNet(t *testing.T, second byte) *testNet {
	t.Helper()
	n := &testNet{suffix: fmt.Sprintf("%d", os.Getpid()%100000)}
	used := map[byte]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if v4 := ipn.IP.To4(); v4 != nil && v4[0] == 10 && v4[1] == second {
				used[v4[2]] = true
			}
		}
	}
	x := byte(os.Getpid()%200 + 20)
	for used[x] {
		x++
	}
	n.hostIP = netip.AddrFrom4([4]byte{10, second, x, 1})
	n.podIP = netip.AddrFrom4([4]byte{10, second, x, 2})
	n.pod = localnet.Host{Name: "pod", NetNS: "d8vt-pod-" + n.suffix, IP: n.podIP}
	n.guest = localnet.Host{Name: "guest", NetNS: "d8vt-guest-" + n.suffix}
	hostEnd, podEnd := "d8vh"+n.suffix, "d8vp"+n.suffix

	cleanup := func() {
		for _, ns := range []string{n.pod.NetNS, n.guest.NetNS} {
			if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
				if err := ip("netns", "del", ns); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		}
		// Deleting the namespace took the veth's inner end and with it the outer one.
		if _, err := net.InterfaceByName(hostEnd); err == nil {
			_ = ip("link", "del", hostEnd)
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	mustIP(t, "netns", "add", n.pod.NetNS)
	mustIP(t, "netns", "add", n.guest.NetNS)
	mustIP(t, "link", "add", hostEnd, "type", "veth", "peer", "name", podEnd, "netns", n.pod.NetNS)
	mustIP(t, "addr", "add", n.hostIP.String()+"/30", "dev", hostEnd)
	mustIP(t, "link", "set", hostEnd, "up")
	mustIP(t, "-n", n.pod.NetNS, "link", "set", podEnd, "name", "eth0")
	mustIP(t, "-n", n.pod.NetNS, "addr", "add", n.podIP.String()+"/30", "dev", "eth0")
	mustIP(t, "-n", n.pod.NetNS, "link", "set", "eth0", "up")
	mustIP(t, "-n", n.pod.NetNS, "link", "set", "lo", "up")
	mustIP(t, "-n", n.pod.NetNS, "route", "add", "default", "via", n.hostIP.String())
	return n
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func mustIP(t *testing.T, args ...string) {
	t.Helper()
	if err := ip(args...); err != nil {
		t.Fatal(err)
	}
}

// childProc is a child running the binding in the pod namespace.
type childProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *bytes.Buffer
	exited chan struct{}
}

func startChild(ctx context.Context, t *testing.T, pod localnet.Host, cfg childConfig) *childProc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &childProc{lines: make(chan string, 16), stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, "ip", "netns", "exec", pod.NetNS, os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	c.cmd.Stderr = c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			t.Logf("binding child's log:\n%s", c.stderr.String())
		}
	})
	c.waitLine(t, "ready")
	return c
}

func (c *childProc) waitLine(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if l == want {
				return
			}
		case <-c.exited:
			t.Fatalf("the binding child exited before %q:\n%s", want, c.stderr.String())
		case <-timeout:
			t.Fatalf("no %q from the binding child within 20s:\n%s", want, c.stderr.String())
		}
	}
}

// stop closes the child's stdin, which makes it tear down, and waits for it.
func (c *childProc) stop(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	c.waitLine(t, "closed")
	<-c.exited
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("binding child exited with %d:\n%s", code, c.stderr.String())
	}
}

// dhcpExchange runs DISCOVER, OFFER, REQUEST, ACK from the guest namespace, as udhcpc does:
// from 0.0.0.0:68 to the broadcast address, before the guest has any address.
func dhcpExchange(t *testing.T, guest localnet.Host, mac string) *network.Message {
	t.Helper()
	hw, _ := net.ParseMAC(mac)
	var conn net.PacketConn
	if err := guest.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr == nil {
					serr = unix.BindToDevice(int(fd), "eth0")
				}
			}); err != nil {
				return err
			}
			return serr
		}}
		var err error
		conn, err = lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", network.ClientPort))
		return err
	}); err != nil {
		t.Fatalf("DHCP client socket: %v", err)
	}
	defer conn.Close()
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: network.ServerPort}

	exchange := func(req *network.Message, want network.MessageType) *network.Message {
		t.Helper()
		b, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1500)
		// Retransmit as a client would: the bridge port may still be coming up.
		for try := 0; try < 10; try++ {
			if _, err := conn.WriteTo(b, bcast); err != nil {
				t.Fatalf("send %s: %v", req.Type(), err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			for {
				n, _, err := conn.ReadFrom(buf)
				if err != nil {
					break
				}
				m, err := network.ParseMessage(buf[:n])
				if err != nil || m.Op != network.OpReply || m.XID != req.XID {
					continue
				}
				if m.Type() != want {
					t.Fatalf("got %s, want %s", m.Type(), want)
				}
				return m
			}
		}
		t.Fatalf("no %s to the %s", want, req.Type())
		return nil
	}
	disc := &network.Message{Op: network.OpRequest, HType: 1, XID: 0xd8760001, Flags: network.Broadcast, CHAddr: hw,
		Options: map[byte][]byte{network.OptMessageType: {byte(network.Discover)}}}
	offer := exchange(disc, network.Offer)
	req := &network.Message{Op: network.OpRequest, HType: 1, XID: 0xd8760002, Flags: network.Broadcast, CHAddr: hw,
		Options: map[byte][]byte{network.OptMessageType: {byte(network.Request)}}}
	req.SetAddrs(network.OptRequestedIP, offer.YIAddr)
	req.Options[network.OptServerID] = offer.Options[network.OptServerID]
	return exchange(req, network.Ack)
}

// serveTCP answers every connection in ns with "<name> from <client address>".
func serveTCP(t *testing.T, ns localnet.Host, addr, name string) {
	t.Helper()
	ln, err := ns.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s from %s\n", name, host)
			c.Close()
		}
	}()
}

// serveUDP echoes datagrams in ns.
func serveUDP(t *testing.T, ns localnet.Host, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket("udp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte("echo "), buf[:n]...), from)
		}
	}()
}

// expectAnswer dials addr from ns (nil: the test's namespace) once and checks the first line.
func expectAnswer(t *testing.T, ns *localnet.Host, addr, want string) {
	t.Helper()
	got, err := firstLine(ns, addr, 5*time.Second)
	if err != nil {
		t.Errorf("%s: %v", addr, err)
		return
	}
	if got != want {
		t.Errorf("%s answered %q, want %q", addr, got, want)
	}
}

func expectUDPEcho(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for try := 0; try < 5; try++ {
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := c.Read(buf); err == nil {
			if got := string(buf[:n]); got != "echo ping" {
				t.Errorf("network.UDP %s answered %q", addr, got)
			}
			return
		}
	}
	t.Errorf("no network.UDP answer from %s", addr)
}

// assertClean checks that the namespace holds nothing of the binding.
func assertClean(t *testing.T, pod localnet.Host) {
	t.Helper()
	for _, link := range []string{network.BridgeName, network.TapName} {
		if err := ip("-n", pod.NetNS, "link", "show", link); err == nil {
			t.Errorf("%s left in the namespace", link)
		}
	}
	f, err := os.Open(filepath.Join("/run/netns", pod.NetNS))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatalf("list nftables tables: %v", err)
	}
	for _, tb := range tables {
		t.Errorf("nftables table %s left in the namespace", tb.Name)
	}
	out, err := exec.Command("ip", "netns", "exec", pod.NetNS, "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	if err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("ip_forward %q (%v), want it back at 0", out, err)
	}
}
