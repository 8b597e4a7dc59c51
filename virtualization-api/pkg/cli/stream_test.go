package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/d8virt/kubevirt-core/pkg/console"
)

// A refused stream says the Status's message and what to do about it.
func TestRefusal(t *testing.T) {
	status := func(msg string) string {
		return `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + msg + `"}`
	}
	cases := []struct {
		code      int
		body, sub string
		want      []string
	}{
		{403, status(`User \"u\" cannot get resource \"virtualmachines/console\"`), "console", []string{`console of VirtualMachine prod/web: 403 User "u" cannot get resource "virtualmachines/console"`, "ask for the verb get on virtualmachines/console of subresources.virtualization.deckhouse.io in prod"}},
		{403, status("forbidden"), "portforward/22/tcp", []string{"ask for the verb get on virtualmachines/portforward"}},
		{404, status(`virtualmachines.virtualization.deckhouse.io \"web\" not found`), "console", []string{"not found", "kubectl get vm -n prod lists the VirtualMachines"}},
		{409, status("the console of the VirtualMachine is in use"), "console", []string{"in use", "kubectl get --raw /apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/prod/virtualmachines/web/console"}},
		{401, "Unauthorized", "vnc", []string{"401 Unauthorized", "log in again"}},
		{500, "boom", "vnc", []string{"vnc of VirtualMachine prod/web: 500 boom"}},
	}
	for _, c := range cases {
		got := refusal(&console.RefusedError{Code: c.code, Message: c.body}, "prod", "web", c.sub).Error()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%d %s: %q lacks %q", c.code, c.sub, got, w)
			}
		}
	}
}

// echo is a stream that answers each write with "echo: " and what was written.
func echo() io.ReadWriteCloser {
	guest, local := net.Pipe()
	go func() {
		defer guest.Close()
		buf := make([]byte, 64)
		for {
			n, err := guest.Read(buf)
			if err != nil {
				return
			}
			if _, err := guest.Write(append([]byte("echo: "), buf[:n]...)); err != nil {
				return
			}
		}
	}()
	return local
}

// Each connection to a forwarded port gets a stream of its own, relayed both ways.
func TestServeRelaysEachConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var opened atomic.Int32
	var errOut bytes.Buffer
	e := &env{streams: genericiooptions.IOStreams{ErrOut: &errOut}}
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, e, l, func(context.Context) (io.ReadWriteCloser, error) {
			opened.Add(1)
			return echo(), nil
		})
	}()
	for i := range 2 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("hello %d", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len("echo: ")+len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "echo: "+msg {
			t.Errorf("connection %d: %q, %v", i, got, err)
		}
		c.Close()
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("%d streams opened for 2 connections", n)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
}

// guestEnd is the guest's side of a fake console stream: what the client typed.
type guestEnd struct {
	conn net.Conn
	got  chan string
}

func newStream(t *testing.T) (io.ReadWriteCloser, *guestEnd) {
	client, guest := net.Pipe()
	g := &guestEnd{conn: guest, got: make(chan string, 16)}
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := guest.Read(buf)
			if n > 0 {
				g.got <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = guest.Close() })
	return client, g
}

func (g *guestEnd) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-g.got:
		if got != want {
			t.Fatalf("the guest got %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the guest never got %q", want)
	}
}

// With --reconnect a console that closes is dialled again until it opens (a refusal reported
// once however often it comes), keys typed in between reach the new stream, and Ctrl+] leaves;
// without it the command ends with the stream.
func TestAttachConsoleReconnects(t *testing.T) {
	first, g1 := newStream(t)
	second, g2 := newStream(t)
	keys, typing := io.Pipe()
	var errOut bytes.Buffer
	var mu sync.Mutex
	e := &env{streams: genericiooptions.IOStreams{In: keys, Out: io.Discard, ErrOut: &lockedWriter{w: &errOut, mu: &mu}}, pollInterval: time.Millisecond}
	refused := errors.New("console of VirtualMachine ns/vm: 409 VMI is not started")
	dials := 0
	dial := func(context.Context, string) (io.ReadWriteCloser, error) {
		dials++
		if dials <= 3 {
			return nil, refused
		}
		return second, nil
	}
	done := make(chan error, 1)
	go func() { done <- attachConsole(context.Background(), e, "ns/vm", first, dial, true) }()

	_, _ = typing.Write([]byte("ls\r"))
	g1.expect(t, "ls\r")
	_ = g1.conn.Close() // the guest restarts
	_, _ = typing.Write([]byte("uptime\r"))
	g2.expect(t, "uptime\r")
	_, _ = typing.Write([]byte("exit\r\x1dnot sent"))
	g2.expect(t, "exit\r")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("left with Ctrl+]: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ctrl+] did not end the console")
	}
	mu.Lock()
	out := errOut.String()
	mu.Unlock()
	if strings.Count(out, "409 VMI is not started") != 1 || !strings.Contains(out, "The console of VirtualMachine ns/vm closed") ||
		!strings.Contains(out, "Reconnected to the console of VirtualMachine ns/vm.") {
		t.Errorf("messages:\n%s", out)
	}

	third, g3 := newStream(t)
	keys, typing = io.Pipe()
	defer typing.Close()
	e.streams.In = keys
	go func() {
		done <- attachConsole(context.Background(), e, "ns/vm", third, func(context.Context, string) (io.ReadWriteCloser, error) {
			t.Error("dialled again without --reconnect")
			return nil, refused
		}, false)
	}()
	_ = g3.conn.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("without --reconnect the console did not end with its stream")
	}
}

// lockedWriter serializes writes from the console's goroutines and the test's reads.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
