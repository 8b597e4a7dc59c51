package destination

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/stream"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Registry pushes container-disk images to Image (DVCR).
type Registry struct {
	Image     string
	Keychain  authn.Keychain
	Transport http.RoundTripper
	Backoff   remote.Backoff
}

// diskOwner is the qemu user KubeVirt's containerDisk files belong to.
const diskOwner = 107

// Push uploads file as the image's one layer, holding disk/<diskName>, then tags it: the tag
// exists only once everything is uploaded. It returns the manifest digest.
//
// The layer is gzip without compression: disks are mostly incompressible or already sparse
// (qcow2), and deflate would cost more time than the import itself (docs/importer.md).
func (g *Registry) Push(ctx context.Context, file, diskName string) (string, error) {
	ref, err := name.ParseReference(g.Image)
	if err != nil {
		return "", contract.Errorf(contract.ReasonInvalidArguments, "destination image %q: %w", g.Image, err)
	}
	src, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("the staged disk: %w", err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return "", fmt.Errorf("the staged disk: %w", err)
	}
	layer := stream.NewLayer(tarOf(src, st.Size(), diskName), stream.WithCompressionLevel(gzip.NoCompression), stream.WithMediaType(types.OCILayer))
	// The config first: the layer's digests are known only once it is uploaded.
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: time.Unix(0, 0).UTC()},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return "", fmt.Errorf("building the image: %w", err)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return "", fmt.Errorf("building the image: %w", err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(g.Keychain),
		remote.WithTransport(g.Transport), remote.WithRetryBackoff(g.Backoff)); err != nil {
		return "", contract.Errorf(contract.ReasonDestinationFailed, "pushing %s: %w", g.Image, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("the pushed image's digest: %w", err)
	}
	return d.String(), nil
}

// tarOf streams a tar of disk/ and disk/<name> with size bytes of src.
func tarOf(src io.Reader, size int64, diskName string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		epoch := time.Unix(0, 0)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: contract.DiskDir, Mode: 0o555, Uid: diskOwner, Gid: diskOwner, ModTime: epoch})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(contract.DiskDir, diskName), Size: size, Mode: 0o440, Uid: diskOwner, Gid: diskOwner, ModTime: epoch})
		}
		if err == nil {
			_, err = io.CopyN(tw, src, size)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}
