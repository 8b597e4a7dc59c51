package imagepull

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/d8virt/devstack/filelock"
)

// Host is how the node reaches one registry, the part of containerd's hosts.toml the local stack
// needs: the CA that signed its serving certificate, or plain HTTP.
type Host struct {
	// CA is a PEM file trusted for this registry in addition to the system's roots.
	CA string `json:"ca,omitempty"`
	// PlainHTTP talks HTTP instead of HTTPS.
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// Auth is a .dockerconfigjson file with the node's own credentials for the registry
	// (NodeAuthenticator).
	Auth string `json:"auth,omitempty"`
}

// Hosts are the registries the node pulls from, by host[:port] as image references name them.
type Hosts map[string]Host

// LoadHosts reads a JSON object of Hosts, such as {"10.213.0.1:5000": {"ca": "/etc/dvcr/ca.crt"}};
// a file that does not exist (yet) names no registry.
func LoadHosts(path string) (Hosts, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Hosts{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry hosts: %w", err)
	}
	var h Hosts
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("registry hosts %s: %w", path, err)
	}
	return h, nil
}

// Image is a pulled image: its manifest digest and its unpacked root file system.
type Image struct {
	Digest string
	Rootfs string
}

// Puller pulls images of its hosts into dir: <dir>/<algorithm>-<hex>/ holds one image's root
// file system, <dir>/refs/<path-escaped reference> the digest the reference was last pulled as.
type Puller struct {
	dir   string
	hosts func() (Hosts, error)
	dial  DialFunc

	// transports are kept per way of reaching a registry, so that pulls reuse connections (a
	// batch of Pods pulling from DVCR paid a TLS handshake each).
	mu         sync.Mutex
	transports map[transportKey]http.RoundTripper
}

// transportKey is a Host as far as its transport goes: the CA's content, not only its path, so
// that a rotated CA gets a new transport.
type transportKey struct {
	ca        string
	plainHTTP bool
}

// transport is Transport(h, p.dial), shared by the pulls that reach a registry alike.
func (p *Puller) transport(h Host) (http.RoundTripper, error) {
	key := transportKey{plainHTTP: h.PlainHTTP}
	if h.CA != "" {
		pem, err := os.ReadFile(h.CA)
		if err != nil {
			return nil, fmt.Errorf("registry CA: %w", err)
		}
		key.ca = string(pem)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.transports[key]; ok {
		return t, nil
	}
	t, err := Transport(h, p.dial)
	if err != nil {
		return nil, err
	}
	if p.transports == nil {
		p.transports = map[transportKey]http.RoundTripper{}
	}
	p.transports[key] = t
	return t, nil
}

// New returns a puller that caches into dir, asks hosts for the registries at every pull (so a
// node learns a registry that is set up after it started) and connects with dial.
func New(dir string, hosts func() (Hosts, error), dial DialFunc) (*Puller, error) {
	if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	return &Puller{dir: dir, hosts: hosts, dial: dial}, nil
}

// Transport is how a client reaches a registry of h: with dial, trusting h's CA besides the
// system's roots.
func Transport(h Host, dial DialFunc) (http.RoundTripper, error) {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = dial
	if h.CA == "" {
		return t, nil
	}
	pem, err := os.ReadFile(h.CA)
	if err != nil {
		return nil, fmt.Errorf("registry CA: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("registry CA: %s holds no PEM certificate", h.CA)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// Registry is the host[:port] an image reference names, or an error for a malformed one.
func Registry(image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return ref.Context().RegistryStr(), nil
}

// Handles tells whether image lives on one of the puller's registries.
func (p *Puller) Handles(image string) (bool, error) {
	if _, err := Registry(image); err != nil {
		return false, nil // not a registry reference: a program of the node
	}
	_, ok, err := p.Host(image)
	return ok, err
}

// Host is how the node reaches the registry of image, ok false for one it does not pull from.
func (p *Puller) Host(image string) (h Host, ok bool, err error) {
	reg, err := Registry(image)
	if err != nil {
		return Host{}, false, err
	}
	hosts, err := p.hosts()
	if err != nil {
		return Host{}, false, err
	}
	h, ok = hosts[reg]
	return h, ok, nil
}

// Cached returns the image a reference was last pulled as, if its root file system is there.
func (p *Puller) Cached(image string) (Image, bool) {
	b, err := os.ReadFile(p.refFile(image))
	if err != nil {
		return Image{}, false
	}
	img := Image{Digest: strings.TrimSpace(string(b))}
	img.Rootfs = p.rootfs(img.Digest)
	if _, err := os.Stat(img.Rootfs); err != nil {
		return Image{}, false
	}
	return img, true
}

func (p *Puller) refFile(image string) string {
	return filepath.Join(p.dir, "refs", url.PathEscape(image))
}

func (p *Puller) rootfs(digest string) string {
	return filepath.Join(p.dir, strings.ReplaceAll(digest, ":", "-"))
}

// Pull fetches the image's manifest with auth and, unless that digest is unpacked already, its
// layers, flattened (whiteouts applied) into a fresh root file system. The registry's own error
// is returned wrapped.
func (p *Puller) Pull(ctx context.Context, image string, auth authn.Authenticator) (Image, error) {
	reg, err := Registry(image)
	if err != nil {
		return Image{}, err
	}
	hosts, err := p.hosts()
	if err != nil {
		return Image{}, err
	}
	host := hosts[reg]
	var nameOpts []name.Option
	if host.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.ParseReference(image, nameOpts...)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w", image, err)
	}
	t, err := p.transport(host)
	if err != nil {
		return Image{}, fmt.Errorf("registry %s: %w", reg, err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(t))
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", image, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", image, err)
	}
	out := Image{Digest: digest.String(), Rootfs: p.rootfs(digest.String())}
	if err := p.unpackOnce(img, image, out.Rootfs); err != nil {
		return Image{}, err
	}
	if err := os.WriteFile(p.refFile(image), []byte(out.Digest), 0o644); err != nil {
		return Image{}, fmt.Errorf("record %s: %w", image, err)
	}
	return out, nil
}

// unpackOnce unpacks img into rootfs unless it is there. Pods that start together mostly want
// the same image: one of them downloads and unpacks it (a lock per digest, shared with the other
// node agents on the machine) while the others wait and then find it there, as containerd
// fetches a blob once for all who ask.
func (p *Puller) unpackOnce(img v1.Image, image, rootfs string) error {
	if _, err := os.Stat(rootfs); err == nil {
		return nil
	}
	unlock, err := filelock.Lock(filepath.Join(p.dir, "locks", filepath.Base(rootfs)))
	if err != nil {
		return fmt.Errorf("unpack %s: %w", image, err)
	}
	defer unlock()
	if _, err := os.Stat(rootfs); err == nil {
		return nil // unpacked while this pull waited
	}
	tmp, err := os.MkdirTemp(p.dir, ".unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fs := mutate.Extract(img)
	err = Untar(fs, tmp)
	fs.Close()
	if err != nil {
		return fmt.Errorf("unpack %s: %w", image, err)
	}
	if err := os.Rename(tmp, rootfs); err != nil {
		return fmt.Errorf("unpack %s: %w", image, err)
	}
	return nil
}

// Untar writes a tar stream of a file system into dir: directories, regular files, symlinks and
// hard links; no entry may leave dir.
func Untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	inside := func(p string) (string, error) {
		clean := filepath.Clean("/" + p)
		if clean == "/" {
			return dir, nil
		}
		return filepath.Join(dir, clean), nil
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target, _ := inside(h.Name)
		if err := noSymlinkBetween(dir, filepath.Dir(target)); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(target, mode); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			src, _ := inside(h.Linkname)
			_ = os.Remove(target)
			if err := os.Link(src, target); err != nil {
				return err
			}
		}
		// Devices, fifos and the like are not needed by what the stack runs.
	}
}

// noSymlinkBetween refuses a path whose directories below root include a symlink: an entry
// written through one could land outside root.
func noSymlinkBetween(root, p string) error {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." {
		return err
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("goes through the symlink %s", cur)
		}
	}
	return nil
}
