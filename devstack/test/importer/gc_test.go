package importer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testGarbageCollection deletes one of two imported images as virtualization-controller does (its
// manifest, by digest), stops DVCR and runs the garbage collection the chart's DVCR pod runs before
// its registries start: the deleted image's blobs leave the storage, the other image's stay, and a
// DVCR started again over that storage serves it unchanged.
func testGarbageCollection(t *testing.T, f *fixture) {
	dir := t.TempDir()
	reg := startDVCRIn(t, dir)
	// A new DVCR has no repository yet, on which the registry's collection would fail.
	reg.Stop()
	if out, err := reg.GarbageCollect(context.Background()); err != nil || !strings.Contains(out, "nothing to collect") {
		t.Fatalf("collection of a new DVCR: %v\n%s", err, out)
	}
	reg = startDVCRIn(t, dir)
	for repo, file := range map[string]string{"cvi/kept:latest": "disk.qcow2", "cvi/deleted:latest": "cidata.iso"} {
		if res, code := f.run(t, append([]string{"--source-url", f.url(file)}, reg.toDVCR(repo)...)...); code != 0 {
			t.Fatalf("import %s: exit %d, %+v", repo, code, res)
		}
	}
	pusher := remote.WithAuth(&authn.Basic{Username: reg.Pusher.Username, Password: reg.Pusher.Password})
	blobs := func(repo string) []v1.Hash {
		ref, err := name.ParseReference(reg.PushAddr + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, pusher, remote.WithTransport(reg.transport()))
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		if repo == "cvi/deleted:latest" {
			del, _ := name.NewDigest(reg.PushAddr + "/cvi/deleted@" + d.String())
			if err := remote.Delete(del, pusher, remote.WithTransport(reg.transport())); err != nil {
				t.Fatalf("delete the manifest: %v", err)
			}
		}
		return []v1.Hash{m.Config.Digest, m.Layers[0].Digest}
	}
	kept, deleted := blobs("cvi/kept:latest"), blobs("cvi/deleted:latest")

	reg.Stop()
	out, err := reg.GarbageCollect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stored := func(h v1.Hash) bool {
		_, err := os.Stat(filepath.Join(reg.Storage, "docker/registry/v2/blobs", h.Algorithm, h.Hex[:2], h.Hex, "data"))
		return err == nil
	}
	for _, h := range kept {
		if !stored(h) {
			t.Errorf("blob %s of the kept image was collected:\n%s", h, out)
		}
	}
	for _, h := range deleted {
		if stored(h) {
			t.Errorf("blob %s of the deleted image is still stored:\n%s", h, out)
		}
	}

	again := startDVCRIn(t, dir)
	files, err := again.pull(t, "cvi/kept:latest", again.puller())
	if err != nil {
		t.Fatalf("pull the kept image after the collection: %v", err)
	}
	if sha(files["disk/disk.qcow2"]) != sha(f.files["disk.qcow2"]) {
		t.Error("the kept image's disk changed")
	}
}
