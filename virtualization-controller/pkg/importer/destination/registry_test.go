package destination

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// failing answers the first failures PATCH requests with code, and counts the bytes of those it
// passes on and the requests but the API version check (DVCR checks a password on each).
type failing struct {
	next     http.Handler
	failures atomic.Int32
	code     int
	patched  atomic.Int64
	requests atomic.Int32
}

func (f *failing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v2/" {
		f.requests.Add(1)
	}
	if r.Method == http.MethodPatch {
		if f.failures.Add(-1) >= 0 {
			io.Copy(io.Discard, r.Body)
			http.Error(w, "try later", f.code)
			return
		}
		body, _ := io.ReadAll(r.Body)
		f.patched.Add(int64(len(body)))
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	f.next.ServeHTTP(w, r)
}

func pushTo(t *testing.T, h http.Handler, image string, data []byte) (*Registry, string, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "disk.qcow2")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	g := &Registry{Image: strings.TrimPrefix(srv.URL, "http://") + "/" + image, Keychain: authn.NewMultiKeychain(),
		Transport: http.DefaultTransport, Backoff: Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3}}
	disk, err := NewFileDisk(file)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := g.Push(context.Background(), disk, "disk.qcow2")
	return g, digest, err
}

// The pushed image has one layer, a tar of disk/ and disk/disk.qcow2 owned by qemu, whose digest
// and size are what the manifest says, uploaded once, in six requests; the manifest's digest is
// what Push returns.
func TestPush(t *testing.T) {
	for _, size := range []int{0, 1, 511, 512, 513, 3 << 20} {
		data := bytes.Repeat([]byte{7}, size)
		f := &failing{next: quietRegistry(), code: http.StatusServiceUnavailable}
		g, digest, err := pushTo(t, f, "cvi/x:latest", data)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if n := f.requests.Load(); n != 6 {
			t.Errorf("size %d: %d requests for the push, want 6", size, n)
		}
		ref, _ := name.ParseReference(g.Image)
		img, err := remote.Image(ref)
		if err != nil {
			t.Fatal(err)
		}
		manifest, _ := img.Manifest()
		if sent := f.patched.Load(); sent != manifest.Layers[0].Size {
			t.Errorf("size %d: %d bytes streamed for a layer of %d: the layer went more than once", size, sent, manifest.Layers[0].Size)
		}

		if d, _ := img.Digest(); d.String() != digest {
			t.Errorf("size %d: Push says %s, the registry has %s", size, digest, d)
		}
		layers, _ := img.Layers()
		if len(layers) != 1 {
			t.Fatalf("size %d: %d layers", size, len(layers))
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		all, _ := io.ReadAll(rc)
		rc.Close()
		d, n, _ := v1.SHA256(bytes.NewReader(all))
		want, _ := layers[0].Digest()
		wantSize, _ := layers[0].Size()
		if d != want || n != wantSize {
			t.Fatalf("size %d: blob %s of %d bytes, the manifest says %s of %d", size, d, n, want, wantSize)
		}
		tr := tar.NewReader(bytes.NewReader(all))
		var names []string
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			names = append(names, h.Name)
			if h.Typeflag == tar.TypeReg {
				got, _ := io.ReadAll(tr)
				if !bytes.Equal(got, data) || h.Uid != diskOwner {
					t.Fatalf("size %d: the file differs (uid %d)", size, h.Uid)
				}
			}
		}
		if len(names) != 2 || names[0] != "disk/" || names[1] != "disk/disk.qcow2" {
			t.Fatalf("entries %v", names)
		}
	}
}

// A registry that answers the layer's upload with 503 gets it again, within the backoff's steps;
// one that refuses it (400) or keeps failing fails the push as DestinationFailed.
func TestPushRetries(t *testing.T) {
	for _, tc := range []struct {
		code, failures int
		ok             bool
	}{
		{http.StatusServiceUnavailable, 2, true},
		{http.StatusTooManyRequests, 1, true},
		{http.StatusServiceUnavailable, 3, false},
		{http.StatusBadRequest, 1, false},
	} {
		f := &failing{next: quietRegistry(), code: tc.code}
		f.failures.Store(int32(tc.failures))
		_, _, err := pushTo(t, f, "vi/ns/x:latest", []byte("disk"))
		if tc.ok != (err == nil) {
			t.Fatalf("%d x %d: %v", tc.failures, tc.code, err)
		}
		if err != nil && contract.ReasonOf(err) != contract.ReasonDestinationFailed {
			t.Errorf("%d x %d: reason %q: %v", tc.failures, tc.code, contract.ReasonOf(err), err)
		}
	}
}

func quietRegistry() http.Handler { return registry.New(registry.Logger(log.New(io.Discard, "", 0))) }
