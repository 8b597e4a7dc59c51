package imagepull

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestConcurrentPullsUnpackOnce starts ten pulls of one image at once, as ten launcher Pods of
// a batch do, against an in-memory registry: the layer is downloaded once and every pull gets
// the same unpacked root file system.
func TestConcurrentPullsUnpackOnce(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed")
	}
	var blobGets atomic.Int32
	reg := registry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
			time.Sleep(50 * time.Millisecond) // a registry farther away than memory: the pulls overlap
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	image := pushGuest(t, host, http.DefaultTransport, name.Insecure)
	blobGets.Store(0)

	var d net.Dialer
	p, err := New(t.TempDir(), func() (Hosts, error) { return Hosts{host: {PlainHTTP: true}}, nil },
		func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]Image, 10)
	errs := make([]error, 10)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = p.Pull(t.Context(), image, authn.Anonymous) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("pull %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Errorf("pull %d: %+v, pull 0: %+v", i, got[i], got[0])
		}
	}
	if _, err := os.Stat(filepath.Join(got[0].Rootfs, "disk", "disk.qcow2")); err != nil {
		t.Errorf("the unpacked image: %v", err)
	}
	if n := blobGets.Load(); n != 1 {
		t.Errorf("%d blob downloads for ten pulls of a one-layer image, want the layer once", n)
	}
}

// TestPullsReuseConnections: pulls from one registry share the puller's transport, so a later
// pull reuses an earlier one's TLS connection instead of dialling and shaking hands anew.
func TestPullsReuseConnections(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed")
	}
	srv := httptest.NewTLSServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	image := pushGuest(t, host, srv.Client().Transport)
	var dials atomic.Int32
	var d net.Dialer
	p, err := New(t.TempDir(), func() (Hosts, error) { return Hosts{host: {CA: ca}}, nil },
		func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := p.Pull(t.Context(), image, authn.Anonymous); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("three pulls one after another dialled %d times, want once", n)
	}
}

// pushGuest pushes a containerDisk image of a small empty qcow2 to the registry at host and
// returns its reference.
func pushGuest(t *testing.T, host string, transport http.RoundTripper, opts ...name.Option) string {
	t.Helper()
	disk := filepath.Join(t.TempDir(), "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", disk, "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	img, err := ContainerDiskImage(disk)
	if err != nil {
		t.Fatal(err)
	}
	image := host + "/cvi/guest:latest"
	ref, err := name.ParseReference(image, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context()), remote.WithTransport(transport)); err != nil {
		t.Fatal(err)
	}
	return image
}
