package core

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// A fake core: the stream of VMI ns/up echoes one message, any other VMI is the core's 404; the
// caller's identity (the bearer token) must be the client's own.
func fakeCore(t *testing.T) *httptest.Server {
	up := websocket.Upgrader{Subprotocols: []string{PlainSubprotocol}}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer own-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/up/console":
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			typ, msg, err := ws.ReadMessage()
			if err == nil {
				_ = ws.WriteMessage(typ, msg)
			}
		case "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/up/freeze":
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"virtualmachineinstance.kubevirt.io \"gone\" not found","reason":"NotFound","code":404}`))
		}
	}))
}

func TestClient(t *testing.T) {
	srv := fakeCore(t)
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL, BearerToken: "own-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ws, err := c.Stream(ctx, "ns", "up", "console")
	if err != nil {
		t.Fatal(err)
	}
	if ws.Subprotocol() != PlainSubprotocol {
		t.Errorf("subprotocol %q", ws.Subprotocol())
	}
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("x"))
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "x" {
		t.Errorf("echo %q %v", msg, err)
	}
	ws.Close()

	_, err = c.Stream(ctx, "ns", "gone", "console")
	if !apierrors.IsNotFound(err) || err.Error() != `the core's virt-api for VMI ns/gone: virtualmachineinstance.kubevirt.io "gone" not found` {
		t.Errorf("missing VMI: %v", err)
	}
	code, _, _, err := c.Call(ctx, http.MethodPut, "ns", "up", "freeze", strings.NewReader("{}"))
	if err != nil || code != http.StatusAccepted {
		t.Errorf("freeze: %d %v", code, err)
	}
	if got := c.URL("ns", "vm", "portforward/22/tcp"); got != srv.URL+"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/portforward/22/tcp" {
		t.Errorf("URL %s", got)
	}
}
