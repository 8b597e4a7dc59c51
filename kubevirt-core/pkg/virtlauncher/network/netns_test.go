package network

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/vishvananda/netns"
)

// testHost is a named network namespace (ip netns) of the test: a Pod's or a guest's.
type testHost struct {
	Name  string
	NetNS string
	IP    netip.Addr
}

// Do runs fn on an OS thread that has entered the namespace. The thread is discarded afterwards
// if it cannot return to the original namespace, so no other goroutine ever runs there.
func (h testHost) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("open own netns: %w", err)
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		target, err := netns.GetFromName(h.NetNS)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", h.NetNS, err)
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", h.NetNS, err)
			runtime.UnlockOSThread()
			return
		}
		errc <- fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

// Listen opens a listener inside the namespace; the socket stays there for its whole life.
func (h testHost) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := h.Do(func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}
