// Package dvcr removes images from DVCR, the module's registry, with the pusher's credentials.
package dvcr

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/d8virt/virtualization-controller/pkg/importer/cabundle"
	"github.com/d8virt/virtualization-controller/pkg/importer/registryauth"
)

// Images deletes images. The credentials and the CA are read from their files at every call, so
// a rotated Secret (mounted as files) is picked up.
type Images struct {
	authFile, caFile string
}

// NewImages authenticates with the .dockerconfigjson at authFile and trusts the PEM CA at caFile.
func NewImages(authFile, caFile string) *Images { return &Images{authFile: authFile, caFile: caFile} }

// Delete removes the manifest ref (host:port/repository:tag) points at, and with it the tag.
// distribution deletes manifests by digest only, so the tag is resolved first. An image that is
// not there is no error.
func (i *Images) Delete(ctx context.Context, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	keychain, err := registryauth.Load(i.authFile)
	if err != nil {
		return fmt.Errorf("DVCR credentials: %w", err)
	}
	tr, err := cabundle.Transport(i.caFile)
	if err != nil {
		return fmt.Errorf("DVCR CA: %w", err)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain), remote.WithTransport(tr)}
	desc, err := remote.Head(tag, opts...)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resolve %s: %w", ref, err)
	}
	err = remote.Delete(tag.Context().Digest(desc.Digest.String()), opts...)
	if err != nil && !notFound(err) {
		return fmt.Errorf("delete %s@%s: %w", ref, desc.Digest, err)
	}
	return nil
}

func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
