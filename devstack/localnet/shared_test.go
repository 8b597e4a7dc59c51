package localnet

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
)

// Two hosts share an address, as the two Pods of a migrating VM: a peer reaches the holder only
// while it lives, the holder and the sharer talk to each other (a migration goes between them),
// the sharer cannot claim the address then, and once the holder is gone the sharer claims it and
// the peer reaches the sharer at once. The sharer has an address of its own all along.
func TestSharedAddressMovesToTheSharerWhenTheHolderGoes(t *testing.T) {
	n := privateNet(t, "d8vs", "10.214.%d.0/28")
	pid := os.Getpid()
	name := func(role string) string { return fmt.Sprintf("share-%s-%d", role, pid) }
	peer, err := n.AddHost(name("peer"))
	if err != nil {
		t.Fatal(err)
	}
	want := lastAddr(n.Subnet).Prev()
	holder, err := n.AddHostAt(name("holder"), want)
	if err != nil {
		t.Fatal(err)
	}
	sharer, err := n.AddHost(name("sharer"))
	if err != nil {
		t.Fatal(err)
	}
	if sharer.IP == want || !n.Subnet.Contains(sharer.IP) {
		t.Fatalf("the sharer's own address is %s", sharer.IP)
	}
	addr := netip.AddrPortFrom(want, 8080).String()
	serveName(t, holder, addr, "holder")
	serveName(t, sharer, ":8080", "sharer") // its own address now, the shared one once claimed

	for range 3 {
		if got := ask(t, peer, addr); got != "holder" {
			t.Fatalf("the peer reached %q at %s, want the holder while it lives", got, want)
		}
	}
	if got := ask(t, peer, netip.AddrPortFrom(sharer.IP, 8080).String()); got != "sharer" {
		t.Fatalf("the sharer's own address answers %q", got)
	}
	// The holder's packets come from the shared address: the sharer must take them.
	if got := ask(t, holder, netip.AddrPortFrom(sharer.IP, 8080).String()); got != "sharer" {
		t.Fatalf("from the holder, the sharer's own address answers %q", got)
	}
	if ok, err := n.ClaimShared(sharer.Name, want); ok || err != nil {
		t.Fatalf("claimed while the holder lives: %v, %v", ok, err)
	}

	if err := n.DeleteHost(holder.Name); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.ClaimShared(sharer.Name, want); !ok || err != nil {
		t.Fatalf("claim once the holder is gone: %v, %v", ok, err)
	}
	start := time.Now()
	if got := ask(t, peer, addr); got != "sharer" {
		t.Fatalf("the peer reached %q at %s after the claim, want the sharer", got, want)
	}
	t.Logf("the peer reached the sharer at %s %s after the claim", want, time.Since(start))
	if _, err := n.AddHostAt(name("late"), want); err == nil {
		t.Error("a third host got the claimed address")
	}

	// The way back (an Evict after a Migrate): the sharer holds want on its eth0 beside its own
	// address, and a new sharer waits for it in turn.
	back, err := n.AddHost(name("back"))
	if err != nil {
		t.Fatal(err)
	}
	serveName(t, back, ":8080", "back")
	if ok, err := n.ClaimShared(back.Name, want); ok || err != nil {
		t.Fatalf("claimed while the first sharer holds it: %v, %v", ok, err)
	}
	if got := ask(t, peer, addr); got != "sharer" {
		t.Fatalf("the peer reached %q, want the sharer while it holds the address", got)
	}
	if err := n.DeleteHost(sharer.Name); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.ClaimShared(back.Name, want); !ok || err != nil {
		t.Fatalf("claim once the first sharer is gone: %v, %v", ok, err)
	}
	if got := ask(t, peer, addr); got != "back" {
		t.Fatalf("the peer reached %q, want the second sharer", got)
	}
}

// serveName answers every connection to addr in h with what.
func serveName(t *testing.T, h Host, addr, what string) {
	t.Helper()
	ln, err := h.Listen("tcp", addr)
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
			_, _ = c.Write([]byte(what))
			c.Close()
		}
	}()
}

// ask connects from h to addr and returns what the server says.
func ask(t *testing.T, from Host, addr string) string {
	t.Helper()
	var got []byte
	err := from.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		got, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		t.Fatalf("from %s to %s: %v", from.Name, addr, err)
	}
	return string(got)
}
