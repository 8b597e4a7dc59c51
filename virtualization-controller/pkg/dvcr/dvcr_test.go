package dvcr

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// An in-memory registry (go-containerregistry's) over TLS stands in for DVCR; the real one is
// exercised by the module's e2e tests.
func TestDelete(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	auth := filepath.Join(dir, ".dockerconfigjson")
	if err := os.WriteFile(auth, []byte(`{"auths":{"`+host+`":{"username":"pusher","password":"p"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := host + "/cvi/tiny:latest"
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	if err := remote.Write(tag, img, remote.WithTransport(srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	images := NewImages(auth, ca)
	if err := images.Delete(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	// distribution drops the tags of a deleted manifest; this registry keeps them, so look at
	// the digest.
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag.Context().Digest(d.String()), remote.WithTransport(srv.Client().Transport)); !notFound(err) {
		t.Fatalf("the manifest is still there: %v", err)
	}
	if err := images.Delete(context.Background(), ref); err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
	if err := NewImages(filepath.Join(dir, "none"), ca).Delete(context.Background(), ref); err == nil || !strings.Contains(err.Error(), "DVCR credentials") {
		t.Fatalf("no credentials: %v", err)
	}
	if err := images.Delete(context.Background(), "not a reference"); err == nil {
		t.Fatal("a bad reference")
	}
}
