package destination

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// uploadLayer uploads the layer as a blob of ref's repository in one pass over its file,
// hashing what it sends: a POST opens the upload, one PATCH streams the layer, and the PUT that
// closes it names the digest (the distribution API's chunked upload with a single chunk). A
// temporary failure (the connection, 429, 5xx) starts the upload again, with g.Backoff.
func (g *Registry) uploadLayer(ctx context.Context, ref name.Reference, l *diskLayer) error {
	repo := ref.Context()
	auth, err := authn.Resolve(ctx, g.Keychain, repo)
	if err != nil {
		return fmt.Errorf("credentials for %s: %w", repo, err)
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, g.Transport, []string{repo.Scope(transport.PushScope)})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: rt}
	wait := g.Backoff.Duration
	for attempt := 1; ; attempt++ {
		err = upload(ctx, client, repo, l)
		if err == nil || attempt >= g.Backoff.Steps || !temporary(ctx, err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = time.Duration(float64(wait) * g.Backoff.Factor)
		if g.Backoff.Cap > 0 && wait > g.Backoff.Cap {
			wait = g.Backoff.Cap
		}
	}
}

func upload(ctx context.Context, client *http.Client, repo name.Repository, l *diskLayer) error {
	start := &url.URL{Scheme: repo.Registry.Scheme(), Host: repo.RegistryStr(), Path: "/v2/" + repo.RepositoryStr() + "/blobs/uploads/"}
	loc, err := send(ctx, client, http.MethodPost, start, nil, 0, http.StatusAccepted)
	if err != nil {
		return err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if loc, err = send(ctx, client, http.MethodPatch, loc, io.TeeReader(rc, h), l.tarSize, http.StatusAccepted, http.StatusNoContent); err != nil {
		return err
	}
	digest := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	q := loc.Query()
	q.Set("digest", digest.String())
	loc.RawQuery = q.Encode()
	if _, err := send(ctx, client, http.MethodPut, loc, nil, 0, http.StatusCreated); err != nil {
		return err
	}
	l.digest = digest
	return nil
}

// send makes one request of the upload and returns where the next one goes (the answer's
// Location, relative to u).
func send(ctx context.Context, client *http.Client, method string, u *url.URL, body io.Reader, size int64, codes ...int) (*url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, codes...); err != nil {
		return nil, err
	}
	next, err := u.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, fmt.Errorf("%s %s: the registry's Location: %w", method, u.Redacted(), err)
	}
	return next, nil
}

// temporary reports whether an upload that failed with err may succeed when tried again.
func temporary(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500
	}
	var ue *url.Error // the connection: the client's errors are all *url.Error
	return errors.As(err, &ue)
}
