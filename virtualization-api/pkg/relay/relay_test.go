package relay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// guest is an echo server standing in for the core's stream; it closes with closeCode when it
// reads "bye", and reports the close it got from the relay.
func guest(t *testing.T, closeCode int, got chan<- int) *httptest.Server {
	up := websocket.Upgrader{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				if ce, ok := err.(*websocket.CloseError); ok {
					got <- ce.Code
				}
				return
			}
			if string(msg) == "bye" {
				_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(closeCode, "guest says bye"))
				_, _, _ = ws.ReadMessage()
				return
			}
			if err := ws.WriteMessage(typ, msg); err != nil {
				return
			}
		}
	}))
}

type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) add(dir string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[dir] += n
}

// middle serves the relay: a client's WebSocket relayed to the guest at target.
func middle(t *testing.T, cfg Config, target string, codes chan<- int) *httptest.Server {
	up := websocket.Upgrader{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(target, "http"), nil)
		if err != nil {
			t.Errorf("dial the guest: %v", err)
			return
		}
		client, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		codes <- cfg.Run(client, upstream)
	}))
}

func dial(t *testing.T, url string) *websocket.Conn {
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestRelay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clientEnds bool // the client closes with 4001; else the guest closes with 1000
		wantGuest  int  // the close the guest gets (client ends)
		wantClient int  // the close the client gets
	}{
		{"client closes", true, 4001, 4001},
		{"guest closes", false, 0, websocket.CloseNormalClosure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guestGot := make(chan int, 1)
			g := guest(t, websocket.CloseNormalClosure, guestGot)
			defer g.Close()
			c := &counts{n: map[string]int{}}
			codes := make(chan int, 1)
			m := middle(t, Config{PingInterval: 50 * time.Millisecond, CloseGrace: time.Second, Count: c.add}, g.URL, codes)
			defer m.Close()
			ws := dial(t, m.URL)
			defer ws.Close()

			if err := ws.WriteMessage(websocket.BinaryMessage, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			// Idle for longer than three ping intervals: keep-alives keep both legs open
			// while the client reads.
			_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			typ, msg, err := ws.ReadMessage()
			if err != nil || typ != websocket.BinaryMessage || string(msg) != "hello" {
				t.Fatalf("echo: %d %q %v", typ, msg, err)
			}
			idle := make(chan error, 1)
			go func() {
				_, _, err := ws.ReadMessage()
				idle <- err
			}()
			select {
			case err := <-idle:
				t.Fatalf("idle stream ended: %v", err)
			case <-time.After(300 * time.Millisecond):
			}

			if tc.clientEnds {
				if err := ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "done")); err != nil {
					t.Fatal(err)
				}
				if got := <-guestGot; got != tc.wantGuest {
					t.Errorf("guest got close %d, want %d", got, tc.wantGuest)
				}
			} else if err := ws.WriteMessage(websocket.TextMessage, []byte("bye")); err != nil {
				t.Fatal(err)
			}
			err = <-idle
			if !websocket.IsCloseError(err, tc.wantClient) {
				t.Errorf("client read %v, want close %d", err, tc.wantClient)
			}
			if code := <-codes; code != tc.wantClient {
				t.Errorf("Run returned %d, want %d", code, tc.wantClient)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			wantIn := 5
			if !tc.clientEnds {
				wantIn += 3
			}
			if c.n[ToGuest] != wantIn || c.n[ToClient] != 5 {
				t.Errorf("counted %v", c.n)
			}
		})
	}
}

func TestCloseOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{&websocket.CloseError{Code: websocket.CloseNoStatusReceived}, websocket.CloseNormalClosure},
		{&websocket.CloseError{Code: websocket.CloseAbnormalClosure}, websocket.CloseInternalServerErr},
		{&websocket.CloseError{Code: 4002, Text: "x"}, 4002},
		{&websocket.CloseError{Code: websocket.CloseGoingAway}, websocket.CloseGoingAway},
		{timeoutErr{}, websocket.CloseGoingAway},
		{http.ErrHandlerTimeout, websocket.CloseInternalServerErr},
	} {
		if code, _ := closeOf(tc.err); code != tc.code {
			t.Errorf("closeOf(%v) = %d, want %d", tc.err, code, tc.code)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// A client that answers no ping (it never reads) is dead after three intervals: the guest is
// told 1001.
func TestDeadClient(t *testing.T) {
	guestGot := make(chan int, 1)
	g := guest(t, websocket.CloseNormalClosure, guestGot)
	defer g.Close()
	codes := make(chan int, 1)
	m := middle(t, Config{PingInterval: 30 * time.Millisecond, CloseGrace: 100 * time.Millisecond, Count: func(string, int) {}}, g.URL, codes)
	defer m.Close()
	ws := dial(t, m.URL)
	defer ws.Close()
	select {
	case got := <-guestGot:
		if got != websocket.CloseGoingAway {
			t.Errorf("guest got close %d, want %d", got, websocket.CloseGoingAway)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a client that answers no ping still holds the stream")
	}
	<-codes
}
