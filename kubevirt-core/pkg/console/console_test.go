package console

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

func TestURL(t *testing.T) {
	cases := []struct{ host, want string }{
		{"https://10.0.0.1:6443", "wss://10.0.0.1:6443/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console"},
		{"http://127.0.0.1:23915/", "ws://127.0.0.1:23915/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console"},
		{"10.0.0.1:6443", "wss://10.0.0.1:6443/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console"},
	}
	for _, c := range cases {
		got, err := URL(&rest.Config{Host: c.host}, "ns", "vm", "console")
		if err != nil || got != c.want {
			t.Errorf("URL(%q) = %q, %v; want %q", c.host, got, err, c.want)
		}
	}
}

func TestResourceURL(t *testing.T) {
	sub := wsrelay.PortForward{Port: 8080, Protocol: "udp"}.Path()
	got, err := ResourceURL(&rest.Config{Host: "https://10.0.0.1:6443"}, VMs, "ns", "vm", sub)
	want := "wss://10.0.0.1:6443/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/portforward/8080/udp"
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

var up = websocket.Upgrader{Subprotocols: []string{wsrelay.PlainSubprotocol}}

// TestRelayChain runs the console path with the real relays: client -> "virt-api" (Pair) ->
// "virt-handler" (Raw) -> a line-echoing "guest" on a byte stream.
func TestRelayChain(t *testing.T) {
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guestSide, relaySide := net.Pipe()
		go func() {
			defer guestSide.Close()
			sc := bufio.NewScanner(guestSide)
			for sc.Scan() {
				if _, err := guestSide.Write([]byte("echo:" + sc.Text() + "\n")); err != nil {
					return
				}
			}
		}()
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wsrelay.Raw(ws, relaySide)
		relaySide.Close()
	}))
	defer handler.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := websocket.Dialer{Subprotocols: []string{wsrelay.PlainSubprotocol}}
		upstream, _, err := d.Dial("ws"+strings.TrimPrefix(handler.URL, "http"), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wsrelay.Pair(down, upstream)
	}))
	defer api.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(ctx, &rest.Config{Host: api.URL}, "ns", "vm", "console")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Two writes whose bytes the guest sees as one line, and an answer read across messages.
	for _, part := range []string{"hel", "lo\n"} {
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "echo:hello\n" {
		t.Fatalf("read %q, %v", line, err)
	}
}

func TestOpenReportsRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"kind":"Status","message":"VMI is not running"}`))
	}))
	defer srv.Close()
	_, err := Open(context.Background(), &rest.Config{Host: srv.URL}, "ns", "vm", "console")
	if err == nil || !strings.Contains(err.Error(), "VMI is not running") {
		t.Fatalf("err = %v", err)
	}
}
