package transport

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// step is one event the fake apiserver sends; want is what the component must receive, empty
// when the event must be dropped (it is about a hidden stock kubevirt.io object).
type step struct{ upstream, want string }

const stepTimeout = 5 * time.Second

// TestWatchStreamsEventByEvent proves that watch events are restored and handed over one at a time:
// the fake apiserver sends the next event only after the client has received the previous one, so
// an engine that buffered the stream would never deliver anything.
func TestWatchStreamsEventByEvent(t *testing.T) {
	vmEvent := func(typ, body string) string { return `{"type":"` + typ + `","object":` + body + `}` }
	stockCRD := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io","resourceVersion":"3"},"spec":{"group":"kubevirt.io","names":{"kind":"VirtualMachine","plural":"virtualmachines"}}}`
	renamedCRD := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"internalvirtualizationvirtualmachines.IG","resourceVersion":"4"},"spec":{"group":"IG","names":{"kind":"InternalVirtualizationVirtualMachine","plural":"internalvirtualizationvirtualmachines"}}}`
	restoredCRD := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io","resourceVersion":"4"},"spec":{"group":"kubevirt.io","names":{"kind":"VirtualMachine","plural":"virtualmachines"}}}`
	for _, tc := range []struct {
		name      string
		target    string // component view
		wantPath  string // cluster view
		resource  string // active-watches label
		steps     []step
		legacyURL bool
	}{
		{name: "virtual machines", target: vmPath + "?watch=true&resourceVersion=1&allowWatchBookmarks=true",
			wantPath: vmPathC, resource: "virtualmachines.kubevirt.io",
			steps: []step{
				{vmEvent("ADDED", vmJSONC), vmEvent("ADDED", vmJSON)},
				{vmEvent("MODIFIED", vmJSONC), vmEvent("MODIFIED", vmJSON)},
				{vmEvent("BOOKMARK", `{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}`),
					vmEvent("BOOKMARK", `{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}`)},
				{vmEvent("DELETED", vmJSONC), vmEvent("DELETED", vmJSON)},
				{vmEvent("ERROR", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (12)","reason":"Expired","code":410}`),
					vmEvent("ERROR", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (12)","reason":"Expired","code":410}`)},
			}},
		{name: "legacy watch path", target: "/apis/kubevirt.io/v1/watch/namespaces/ns/virtualmachines",
			wantPath: "/apis/IG/v1/watch/namespaces/ns/internalvirtualizationvirtualmachines", resource: "virtualmachines.kubevirt.io",
			steps: []step{{vmEvent("ADDED", vmJSONC), vmEvent("ADDED", vmJSON)}}},
		// The apiserver takes every value of watch but false and 0 (any case) as a watch, the empty
		// one included; the Python client sends True.
		{name: "watch=True", target: vmPath + "?watch=True",
			wantPath: vmPathC, resource: "virtualmachines.kubevirt.io",
			steps: []step{{vmEvent("ADDED", vmJSONC), vmEvent("ADDED", vmJSON)}}},
		{name: "watch=yes", target: vmPath + "?resourceVersion=0&watch=yes",
			wantPath: vmPathC, resource: "virtualmachines.kubevirt.io",
			steps: []step{{vmEvent("ADDED", vmJSONC), vmEvent("ADDED", vmJSON)}}},
		{name: "empty watch", target: vmPath + "?watch",
			wantPath: vmPathC, resource: "virtualmachines.kubevirt.io",
			steps: []step{{vmEvent("ADDED", vmJSONC), vmEvent("ADDED", vmJSON)}}},
		{name: "escaped watch key", target: vmPath + "?%77atch=TRUE",
			wantPath: vmPathC, resource: "virtualmachines.kubevirt.io",
			steps: []step{{vmEvent("ADDED", vmJSONC), vmEvent("ADDED", vmJSON)}}},
		{name: "core legacy watch path", target: "/api/v1/watch/pods",
			wantPath: "/api/v1/watch/pods", resource: "pods",
			steps: []step{{vmEvent("ADDED", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"IK/x":"y"}}}`),
				vmEvent("ADDED", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"kubevirt.io/x":"y"}}}`)}}},
		{name: "crds hide the stock kubevirt crd", target: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=1",
			wantPath: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", resource: "customresourcedefinitions.apiextensions.k8s.io",
			steps: []step{
				{vmEvent("ADDED", stockCRD), ""},
				{vmEvent("ADDED", renamedCRD), vmEvent("ADDED", restoredCRD)},
				{vmEvent("MODIFIED", stockCRD), ""},
				{vmEvent("DELETED", renamedCRD), vmEvent("DELETED", restoredCRD)},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack := make(chan struct{})
			finish := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != c(tc.wantPath) {
					http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				for _, s := range tc.steps {
					_, _ = w.Write([]byte(c(s.upstream) + "\n"))
					w.(http.Flusher).Flush()
					if s.want == "" {
						continue // dropped: the client will never acknowledge it
					}
					select {
					case <-ack:
					case <-r.Context().Done():
						return
					case <-time.After(stepTimeout):
						t.Errorf("client did not receive %s before the next event was due: the watch is buffered", s.want)
						return
					}
				}
				select {
				case <-finish:
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			rt, m := newEngine(&http.Transport{})
			gauge := m.ActiveWatches.WithLabelValues("api", tc.resource)

			resp, err := rt.RoundTrip(newRequest(t, "GET", srv.URL+tc.target, "", nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp))
			}
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			for _, s := range tc.steps {
				if s.want == "" {
					continue
				}
				select {
				case got, ok := <-lines:
					if !ok {
						t.Fatalf("stream ended before %s", s.want)
					}
					if !jsonEqual(t, []byte(got), []byte(s.want)) {
						t.Errorf("event\n got %s\nwant %s", got, s.want)
					}
				case <-time.After(stepTimeout):
					t.Fatalf("no event within %v; want %s", stepTimeout, s.want)
				}
				if v := testutil.ToFloat64(gauge); v != 1 {
					t.Errorf("active watches %v while the watch is open, want 1", v)
				}
				ack <- struct{}{}
			}
			close(finish)
			select {
			case extra, ok := <-lines:
				if ok {
					t.Errorf("unexpected event %s (a hidden object leaked?)", extra)
				}
			case <-time.After(stepTimeout):
				t.Fatal("stream did not end with the upstream")
			}
			resp.Body.Close()
			waitFor(t, "active watches back to 0", func() bool { return testutil.ToFloat64(gauge) == 0 })
			if n := counterValue(m.Rewrites, "watch_event", "restore"); n != float64(len(tc.steps)) {
				t.Errorf("rewrites_total{watch_event,restore} = %v, want %d", n, len(tc.steps))
			}
		})
	}
}

// TestWatchCloseEndsUpstream: client-go stops a watch by closing the body, without cancelling the
// request context. The engine must then end the upstream request at once rather than when the
// next event arrives, which on a quiet resource may be never.
func TestWatchCloseEndsUpstream(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(c(`{"type":"ADDED","object":` + vmJSONC + "}\n")))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	rt, m := newEngine(&http.Transport{})
	resp, err := rt.RoundTrip(newRequest(t, "GET", srv.URL+vmPath+"?watch=true", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !jsonEqual(t, []byte(line), []byte(`{"type":"ADDED","object":`+vmJSON+`}`)) {
		t.Fatalf("first event %q: %v", line, err)
	}
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(stepTimeout):
		t.Fatal("the upstream watch is still open after the client closed the body")
	}
	gauge := m.ActiveWatches.WithLabelValues("api", "virtualmachines.kubevirt.io")
	waitFor(t, "active watches back to 0", func() bool { return testutil.ToFloat64(gauge) == 0 })
	if n := sumCounter(m.RewriteErrors); n != 0 {
		t.Errorf("a client closing its watch counted %v rewrite errors", n)
	}
}

// TestWatchMalformedEvent: a broken event ends the stream with an error instead of being passed on.
func TestWatchMalformedEvent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(c(`{"type":"ADDED","object":` + vmJSONC + "}\n")))
		_, _ = w.Write([]byte(`{"type":"ADDED","object":{"kind":}}` + "\n"))
	}))
	defer srv.Close()
	rt, _ := newEngine(&http.Transport{})
	resp, err := rt.RoundTrip(newRequest(t, "GET", srv.URL+vmPath+"?watch=true", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := readBody(resp)
	if err == nil {
		t.Fatalf("malformed event read without error: %s", got)
	}
	if strings.Count(string(got), "\n") != 1 || strings.Contains(string(got), `"kind":}`) {
		t.Errorf("client received %q", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventReader: events are split on the structure, not on newlines, and braces inside strings
// do not count.
func TestEventReader(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		want         []string
		wantErr      bool
	}{
		{"newline separated", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}, false},
		{"back to back", `{"a":1}{"b":[{}]}`, []string{`{"a":1}`, `{"b":[{}]}`}, false},
		{"braces and escapes in strings", `{"m":"}{\"}\\"} {"n":"]"}`, []string{`{"m":"}{\"}\\"}`, `{"n":"]"}`}, false},
		{"cut short", `{"a":1}{"b":`, []string{`{"a":1}`}, true},
		{"not an object", `{"a":1} [1]`, []string{`{"a":1}`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			er := newEventReader(strings.NewReader(tc.stream))
			var got []string
			var err error
			for {
				var ev []byte
				if ev, err = er.next(); err != nil {
					break
				}
				got = append(got, string(ev))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("events %q, want %q", got, tc.want)
			}
			if isEOF := err == io.EOF; isEOF == tc.wantErr {
				t.Errorf("end %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}
