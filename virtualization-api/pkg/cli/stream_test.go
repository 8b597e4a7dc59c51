package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

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
