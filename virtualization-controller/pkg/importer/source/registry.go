package source

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Registry reads the disk of a container-disk image: the first regular file under disk/ in its
// layers, the newest layer first. go-containerregistry retries transient failures itself.
type Registry struct {
	Image     string
	Keychain  authn.Keychain
	Transport http.RoundTripper
	Backoff   Backoff
}

// Open fetches the manifest and starts reading the layer that holds the disk.
func (g *Registry) Open(ctx context.Context) (Stream, error) {
	ref, err := name.ParseReference(g.Image)
	if err != nil {
		return Stream{}, contract.Errorf(contract.ReasonInvalidArguments, "source image %q: %w", g.Image, err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(g.Keychain),
		remote.WithTransport(g.Transport), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}),
		remote.WithRetryBackoff(remote.Backoff{Duration: g.Backoff.Initial, Factor: 2, Steps: g.Backoff.Attempts, Cap: g.Backoff.Max}))
	if err != nil {
		return Stream{}, registryError(g.Image, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return Stream{}, registryError(g.Image, err)
	}
	for i := len(layers) - 1; i >= 0; i-- {
		s, found, err := diskIn(layers[i])
		if err != nil {
			return Stream{}, registryError(g.Image, err)
		}
		if found {
			return s, nil
		}
	}
	return Stream{}, contract.Errorf(contract.ReasonNotDiskImage, "image %s has no file under /%s: not a container disk", g.Image, contract.DiskDir)
}

func diskIn(l v1.Layer) (Stream, bool, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return Stream{}, false, err
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			rc.Close()
			return Stream{}, false, nil
		}
		if err != nil {
			rc.Close()
			return Stream{}, false, fmt.Errorf("reading a layer: %w", err)
		}
		p := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Typeflag == tar.TypeReg && strings.HasPrefix(p, contract.DiskDir) && !strings.Contains(p[len(contract.DiskDir):], "/") {
			return Stream{ReadCloser: layerFile{tr, rc}, Size: h.Size}, true, nil
		}
	}
}

type layerFile struct {
	io.Reader
	io.Closer
}

func registryError(image string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return contract.Errorf(contract.ReasonSourceNotFound, "image %s: %w: check the image name and tag", image, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return contract.Errorf(contract.ReasonSourceForbidden, "image %s: %w: check the imagePullSecret", image, err)
		}
		return contract.Errorf(contract.ReasonSourceFailed, "image %s: %w", image, err)
	}
	if tlsFailure(err) {
		return contract.Errorf(contract.ReasonSourceUnreachable, "image %s: %w (set the caBundle that signed the registry's certificate)", image, err)
	}
	return contract.Errorf(contract.ReasonSourceUnreachable, "image %s: %w", image, err)
}
