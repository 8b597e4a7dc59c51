package transport

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// pieces hands out its input in reads of the given sizes (the last size repeats).
type pieces struct {
	b     []byte
	sizes []int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), len(p.b), p.sizes[0])
	if len(p.sizes) > 1 {
		p.sizes = p.sizes[1:]
	}
	copy(b, p.b[:n])
	p.b = p.b[n:]
	return n, nil
}

func (p *pieces) Close() error { return nil }

// watchStream is three events in the cluster view, the middle one about a hidden stock object,
// with names in JSON escapes, and what the component must receive.
var (
	watchStream = c(`{"type":"ADDED","object":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"a","labels":{"kubevirt\u002einternal.virtualization.deckhouse.io/x":"1"}}}}` + "\n" +
		`{"type":"ADDED","object":{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io"},"spec":{"group":"kubevirt.io"}}}` + "\n" +
		`{"type":"MODIFIED","object":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"b","annotations":{"IK/y":"\"}{\\"}}}}` + "\n")
	watchWant = `{"type":"ADDED","object":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"a","labels":{"kubevirt.io/x":"1"}}}}` + "\n" +
		`{"type":"MODIFIED","object":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"b","annotations":{"kubevirt.io/y":"\"}{\\"}}}}` + "\n"
)

// TestWatchBodySplitEverywhere: events are restored alike however the upstream's reads cut them,
// and whatever the size of the client's reads.
func TestWatchBodySplitEverywhere(t *testing.T) {
	rt, _ := newEngine(http.DefaultTransport)
	for cut := 0; cut < len(watchStream); cut++ {
		for _, sizes := range [][]int{{cut + 1, len(watchStream)}, {cut + 1, 1}, {cut + 1, 5}} {
			for _, readSize := range []int{1, 7, 32 << 10} {
				body := rt.restoreWatch(&pieces{b: []byte(watchStream), sizes: sizes}, rewriteTarget(), "virtualmachines.kubevirt.io")
				var got bytes.Buffer
				buf := make([]byte, readSize)
				for {
					n, err := body.Read(buf)
					got.Write(buf[:n])
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("reads of %v: %v", sizes, err)
					}
				}
				body.Close()
				if got.String() != watchWant {
					t.Fatalf("upstream reads of %v, client reads of %d:\n got %s\nwant %s", sizes, readSize, got.String(), watchWant)
				}
			}
		}
	}
}

// TestWatchBodyCutEvent: a stream that ends inside an event is an error for the client, after
// the events before it.
func TestWatchBodyCutEvent(t *testing.T) {
	rt, _ := newEngine(http.DefaultTransport)
	first := strings.Index(watchStream, "\n") + 1
	for cut := first + 1; cut < len(watchStream)-2; cut++ {
		if watchStream[cut] == '\n' || watchStream[cut-1] == '\n' {
			continue // the input ends between events: a clean end
		}
		body := rt.restoreWatch(&pieces{b: []byte(watchStream[:cut]), sizes: []int{cut / 3, 2}}, rewriteTarget(), "virtualmachines.kubevirt.io")
		got, err := io.ReadAll(body)
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: err %v", cut, err)
		}
		if !strings.HasPrefix(watchWant, string(got)) || !strings.HasSuffix(string(got), "\n") {
			t.Fatalf("cut at %d: client got %q", cut, got)
		}
	}
}

func rewriteTarget() rewrite.Target {
	return testRewriter.TargetFor(rewrite.Restore, rewrite.ParsePath(c("/apis/IG/v1/namespaces/ns/internalvirtualizationvirtualmachines")))
}
