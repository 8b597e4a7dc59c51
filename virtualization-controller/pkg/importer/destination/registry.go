package destination

import (
	"archive/tar"
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
// The layer is an uncompressed tar: disks are mostly incompressible or already sparse (qcow2),
// and gzip (even gzip's stored blocks through go-containerregistry's streaming layer, which
// hashes twice) cost several times the import itself (docs/importer.md).
func (g *Registry) Push(ctx context.Context, file, diskName string) (string, error) {
	ref, err := name.ParseReference(g.Image)
	if err != nil {
		return "", contract.Errorf(contract.ReasonInvalidArguments, "destination image %q: %w", g.Image, err)
	}
	layer, err := newDiskLayer(file, diskName)
	if err != nil {
		return "", err
	}
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

// diskLayer is an uncompressed layer of disk/ and disk/<name>, read from a file; its digest
// takes one pass over the file.
type diskLayer struct {
	file, name string
	size       int64 // of the file
	digest     v1.Hash
	tarSize    int64
}

func newDiskLayer(file, name string) (*diskLayer, error) {
	l := &diskLayer{file: file, name: name}
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("the staged disk: %w", err)
	}
	l.size = st.Size()
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if l.digest, l.tarSize, err = v1.SHA256(rc); err != nil {
		return nil, fmt.Errorf("hashing the layer: %w", err)
	}
	return l, nil
}

func (l *diskLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *diskLayer) DiffID() (v1.Hash, error)            { return l.digest, nil }
func (l *diskLayer) Size() (int64, error)                { return l.tarSize, nil }
func (l *diskLayer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }
func (l *diskLayer) Compressed() (io.ReadCloser, error)  { return l.Uncompressed() }

// Uncompressed streams the tar.
func (l *diskLayer) Uncompressed() (io.ReadCloser, error) {
	src, err := os.Open(l.file)
	if err != nil {
		return nil, fmt.Errorf("the staged disk: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		defer src.Close()
		tw := tar.NewWriter(pw)
		epoch := time.Unix(0, 0)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: contract.DiskDir, Mode: 0o555, Uid: diskOwner, Gid: diskOwner, ModTime: epoch})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(contract.DiskDir, l.name), Size: l.size, Mode: 0o440, Uid: diskOwner, Gid: diskOwner, ModTime: epoch})
		}
		if err == nil {
			_, err = io.CopyN(tw, src, l.size)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}
