package destination

import (
	"bytes"
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

// pusher speaks the distribution API to one repository with the fewest authenticated requests
// (DVCR checks a bcrypt password on each): the layer in one POST, PATCH and PUT, the config in a
// POST and a PUT, the manifest in a PUT, and no HEAD before any of them (the layer's digest is
// not known before it is sent, and the config's bytes are too few to be worth asking for).
type pusher struct {
	client  *http.Client
	repo    name.Repository
	backoff Backoff
}

// Backoff is how a temporary failure (the connection, 429, 5xx) is tried again: Steps tries in
// all, waiting Duration, then Factor times as long each time, at most Cap.
type Backoff struct {
	Duration time.Duration
	Factor   float64
	Steps    int
	Cap      time.Duration
}

func (g *Registry) pusher(ctx context.Context, repo name.Repository) (*pusher, error) {
	auth, err := authn.Resolve(ctx, g.Keychain, repo)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", repo, err)
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, g.Transport, []string{repo.Scope(transport.PushScope)})
	if err != nil {
		return nil, err
	}
	return &pusher{client: &http.Client{Transport: rt}, repo: repo, backoff: g.Backoff}, nil
}

// retry runs step until it succeeds, fails for good, or the back-off's steps are spent.
func (p *pusher) retry(ctx context.Context, step func() error) error {
	wait := p.backoff.Duration
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || attempt >= p.backoff.Steps || !temporary(ctx, err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = time.Duration(float64(wait) * p.backoff.Factor)
		if p.backoff.Cap > 0 && wait > p.backoff.Cap {
			wait = p.backoff.Cap
		}
	}
}

func (p *pusher) url(path string) *url.URL {
	return &url.URL{Scheme: p.repo.Registry.Scheme(), Host: p.repo.RegistryStr(), Path: "/v2/" + p.repo.RepositoryStr() + path}
}

// layer uploads l in one pass over its file, hashing what it sends: a POST opens the upload, one
// PATCH streams the layer, and the PUT that closes it names the digest (the chunked upload with a
// single chunk).
func (p *pusher) layer(ctx context.Context, l *diskLayer) error {
	loc, err := send(ctx, p.client, http.MethodPost, p.url("/blobs/uploads/"), nil, http.StatusAccepted)
	if err != nil {
		return err
	}
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if loc, err = send(ctx, p.client, http.MethodPatch, loc, &body{r: io.TeeReader(rc, h), size: l.tarSize}, http.StatusAccepted, http.StatusNoContent); err != nil {
		return err
	}
	digest := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	if _, err := send(ctx, p.client, http.MethodPut, withDigest(loc, digest), nil, http.StatusCreated); err != nil {
		return err
	}
	l.digest = digest
	return nil
}

// blob uploads data, whose digest is known, in a POST and a PUT that carries it (the monolithic
// upload).
func (p *pusher) blob(ctx context.Context, digest v1.Hash, data []byte) error {
	loc, err := send(ctx, p.client, http.MethodPost, p.url("/blobs/uploads/"), nil, http.StatusAccepted)
	if err != nil {
		return err
	}
	_, err = send(ctx, p.client, http.MethodPut, withDigest(loc, digest), &body{r: bytes.NewReader(data), size: int64(len(data))}, http.StatusCreated)
	return err
}

// manifest puts the manifest of media type mediaType under reference (a tag): the image exists
// from then on.
func (p *pusher) manifest(ctx context.Context, reference, mediaType string, data []byte) error {
	_, err := send(ctx, p.client, http.MethodPut, p.url("/manifests/"+reference), &body{r: bytes.NewReader(data), size: int64(len(data)), contentType: mediaType}, http.StatusCreated)
	return err
}

func withDigest(u *url.URL, digest v1.Hash) *url.URL {
	q := u.Query()
	q.Set("digest", digest.String())
	u.RawQuery = q.Encode()
	return u
}

// body is a request's body: its length is known, and its type is octet-stream unless told.
type body struct {
	r           io.Reader
	size        int64
	contentType string
}

// send makes one request and returns where the next one of an upload goes (the answer's
// Location, relative to u).
func send(ctx context.Context, client *http.Client, method string, u *url.URL, b *body, codes ...int) (*url.URL, error) {
	var r io.Reader
	if b != nil {
		r = b.r
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	if b != nil {
		req.ContentLength = b.size
		ct := b.contentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		req.Header.Set("Content-Type", ct)
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

// temporary reports whether a request that failed with err may succeed when tried again.
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
