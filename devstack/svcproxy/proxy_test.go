package svcproxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/devstack/servicetable"
)

func TestFrontends(t *testing.T) {
	k := servicetable.Key{Namespace: "ns", Name: "web"}
	be := []netip.AddrPort{netip.MustParseAddrPort("10.213.0.5:8080")}
	table := servicetable.Table{
		k: {NamespacedName: k, ClusterIP: netip.MustParseAddr("10.96.0.20"), Ports: []servicetable.Port{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080, Backends: be},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
		}},
		{Namespace: "ns", Name: "headless"}: {Ports: []servicetable.Port{{Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	got, skipped := Frontends(table, netip.MustParseAddr("10.213.0.1"))
	want := map[netip.AddrPort][]netip.AddrPort{netip.MustParseAddrPort("10.96.0.20:80"): be, netip.MustParseAddrPort("10.213.0.1:30080"): be}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(skipped, []string{"ns/web:53/UDP"}) {
		t.Errorf("Frontends = %v, %v", got, skipped)
	}
	// Without a nodes' address, no node ports.
	if got, _ := Frontends(table, netip.Addr{}); len(got) != 1 {
		t.Errorf("Frontends without a node address = %v", got)
	}
}

// server answers every connection with its name.
func server(t *testing.T, name string) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			fmt.Fprint(c, name)
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

func get(t *testing.T, addr netip.AddrPort) string {
	c, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestSync runs the proxy on loopback: both endpoints serve, a dead endpoint is skipped, an
// endpoint removed by a Sync gets nothing more, and a removed frontend stops listening.
func TestSync(t *testing.T) {
	a, b := server(t, "a"), server(t, "b")
	dead := netip.MustParseAddrPort("127.0.0.1:1") // nothing listens there
	// The frontend's port is chosen by the kernel: listen wraps TCPListen with port 0.
	var front netip.AddrPort
	listen := func(addr netip.AddrPort) (net.Listener, error) {
		ln, err := TCPListen(netip.AddrPortFrom(addr.Addr(), 0))
		if err == nil {
			front = netip.MustParseAddrPort(ln.Addr().String())
		}
		return ln, err
	}
	p := New(slog.New(slog.NewTextHandler(io.Discard, nil)), listen, TCPDial, time.Second)
	defer p.Close()
	key := netip.MustParseAddrPort("127.0.0.1:80")
	if err := p.Sync(map[netip.AddrPort][]netip.AddrPort{key: {a, b, dead}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range 12 {
		seen[get(t, front)]++
	}
	if seen["a"] == 0 || seen["b"] == 0 || seen[""] != 0 {
		t.Errorf("answers over 12 connections: %v, want a and b and never none", seen)
	}
	if err := p.Sync(map[netip.AddrPort][]netip.AddrPort{key: {a}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if got := get(t, front); got != "a" {
			t.Fatalf("connection %d after b left: %q", i, got)
		}
	}
	if err := p.Sync(map[netip.AddrPort][]netip.AddrPort{key: {}}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, front); got != "" {
		t.Errorf("without endpoints: got %q, want the connection closed", got)
	}
	if err := p.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", front.String(), time.Second); err == nil {
		c.Close()
		t.Error("the frontend still listens after its Service went")
	}
}
