package destination

import (
	"archive/tar"
	"bytes"
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
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Registry pushes container-disk images to Image (DVCR).
type Registry struct {
	Image     string
	Keychain  authn.Keychain
	Transport http.RoundTripper
	Backoff   Backoff
}

// diskOwner is the qemu user KubeVirt's containerDisk files belong to.
const diskOwner = 107

// Disk is what an image's disk file holds: its size, and its bytes from the start (read again
// when a push starts over).
type Disk interface {
	Size() int64
	Open() (io.ReadCloser, error)
}

// FileDisk is a disk file as it is.
type FileDisk struct {
	Path string
	size int64
}

// NewFileDisk is the disk file at path.
func NewFileDisk(path string) (FileDisk, error) {
	st, err := os.Stat(path)
	if err != nil {
		return FileDisk{}, fmt.Errorf("the staged disk: %w", err)
	}
	return FileDisk{Path: path, size: st.Size()}, nil
}

// Size is the file's size.
func (f FileDisk) Size() int64 { return f.size }

// Open reads the file (its size when it was looked at).
func (f FileDisk) Open() (io.ReadCloser, error) {
	src, err := os.Open(f.Path)
	if err != nil {
		return nil, fmt.Errorf("the staged disk: %w", err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(src, f.size), src}, nil
}

// Push uploads disk as the image's one layer, holding disk/<diskName>, then its config, then
// tags it with the manifest: the tag exists only once everything is uploaded. It returns the
// manifest digest. The layer is read once: it is hashed as it is uploaded (the digest goes with
// the upload's last request), not before; a push takes six authenticated requests (pusher).
//
// The layer is an uncompressed tar: disks are mostly incompressible or already sparse (qcow2),
// and gzip (even gzip's stored blocks through go-containerregistry's streaming layer, which
// hashes twice) cost several times the import itself (docs/importer.md).
func (g *Registry) Push(ctx context.Context, disk Disk, diskName string) (string, error) {
	ref, err := name.ParseReference(g.Image)
	if err != nil {
		return "", contract.Errorf(contract.ReasonInvalidArguments, "destination image %q: %w", g.Image, err)
	}
	layer, err := newDiskLayer(disk, diskName)
	if err != nil {
		return "", err
	}
	failed := func(err error) (string, error) {
		return "", contract.Errorf(contract.ReasonDestinationFailed, "pushing %s: %w", g.Image, err)
	}
	p, err := g.pusher(ctx, ref.Context())
	if err != nil {
		return failed(err)
	}
	if err := p.retry(ctx, func() error { return p.layer(ctx, layer) }); err != nil {
		return failed(err)
	}
	// The layer's digest is known now: the image around it.
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
	config, err := img.RawConfigFile()
	if err != nil {
		return "", fmt.Errorf("building the image: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return "", fmt.Errorf("building the image: %w", err)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return "", fmt.Errorf("building the image: %w", err)
	}
	if err := p.retry(ctx, func() error { return p.blob(ctx, configName, config) }); err != nil {
		return failed(err)
	}
	if err := p.retry(ctx, func() error { return p.manifest(ctx, ref.Identifier(), string(types.OCIManifestSchema1), manifest) }); err != nil {
		return failed(err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("the pushed image's digest: %w", err)
	}
	return d.String(), nil
}

// diskLayer is an uncompressed layer of disk/ and disk/<name>; its digest is known once it is
// uploaded.
type diskLayer struct {
	disk    Disk
	size    int64  // of the disk file
	header  []byte // the tar headers of disk/ and disk/<name>
	digest  v1.Hash
	tarSize int64
}

// tarTrailer is what ends a tar: two zero blocks.
const tarBlock, tarTrailer = 512, 2 * 512

func newDiskLayer(disk Disk, name string) (*diskLayer, error) {
	size := disk.Size()
	var h bytes.Buffer
	tw := tar.NewWriter(&h)
	epoch := time.Unix(0, 0)
	for _, hdr := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: contract.DiskDir, Mode: 0o555, Uid: diskOwner, Gid: diskOwner, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: path.Join(contract.DiskDir, name), Size: size, Mode: 0o440, Uid: diskOwner, Gid: diskOwner, ModTime: epoch},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("the layer's tar header: %w", err)
		}
	}
	// WriteHeader has written each header block; the file's data follows in Uncompressed.
	return &diskLayer{disk: disk, size: size, header: h.Bytes(),
		tarSize: int64(h.Len()) + size + padding(size) + tarTrailer}, nil
}

// padding fills the last block of a file of size bytes.
func padding(size int64) int64 { return (tarBlock - size%tarBlock) % tarBlock }

func (l *diskLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *diskLayer) DiffID() (v1.Hash, error)            { return l.digest, nil }
func (l *diskLayer) Size() (int64, error)                { return l.tarSize, nil }
func (l *diskLayer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }
func (l *diskLayer) Compressed() (io.ReadCloser, error)  { return l.Uncompressed() }

// Uncompressed reads the tar: the headers, the file, its padding to a block and the trailer.
func (l *diskLayer) Uncompressed() (io.ReadCloser, error) {
	src, err := l.disk.Open()
	if err != nil {
		return nil, err
	}
	r := io.MultiReader(bytes.NewReader(l.header), io.LimitReader(src, l.size), bytes.NewReader(make([]byte, padding(l.size)+tarTrailer)))
	return struct {
		io.Reader
		io.Closer
	}{r, src}, nil
}
