// Package importer tests the importer binary (virtualization-controller/cmd/importer) end to end
// on real parts: the tiny guest's image served by an HTTP server, DVCR as distribution v3's registry
// (devstack/dvcr: TLS, a push and a read-only pull instance with their own credentials), qemu-img.
// It needs no cluster: the importer runs as the host process a Pod's container is on the local node.
package importer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/d8virt/devstack/dvcr"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// fixture is what every test shares: built once.
type fixture struct {
	importer string // the binary
	dir      string // served over HTTP
	files    map[string][]byte
	http     *httptest.Server
	registry
	raw []byte // the guest's disk as raw
}

// registry is DVCR with the files an importer needs to use it.
type registry struct {
	*dvcr.DVCR
	caFile   string
	roots    *x509.CertPool
	pushAuth string // .dockerconfigjson files
	pullAuth string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{importer: buildImporter(t), dir: t.TempDir()}
	tmp := t.TempDir()

	f.files = guesttest.ImportFiles(t, ctx)
	qcow2 := filepath.Join(tmp, "disk.qcow2")
	if err := os.WriteFile(qcow2, f.files["disk.qcow2"], 0o644); err != nil {
		t.Fatal(err)
	}
	rawPath := filepath.Join(tmp, "disk.img")
	if out, err := exec.Command("qemu-img", "convert", "-f", "qcow2", "-O", "raw", qcow2, rawPath).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	var err error
	if f.raw, err = os.ReadFile(rawPath); err != nil {
		t.Fatal(err)
	}
	f.files["disk.img"], f.files["disk.img.gz"] = f.raw, guesttest.Gzip(f.raw)
	for name, data := range f.files {
		if err := os.WriteFile(filepath.Join(f.dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.http = httptest.NewServer(http.FileServer(http.Dir(f.dir)))
	t.Cleanup(f.http.Close)
	f.registry = startDVCR(t)
	return f
}

// buildImporter builds cmd/importer into a temporary directory.
func buildImporter(t testing.TB) string {
	t.Helper()
	for _, bin := range []string{dvcr.Binary, "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing from PATH: make deps builds the registry, hack/install-deps.sh installs qemu-img", bin)
		}
	}
	bin := filepath.Join(t.TempDir(), "importer")
	build := exec.Command("go", "build", "-o", bin, "github.com/d8virt/virtualization-controller/cmd/importer")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the importer: %v\n%s", err, out)
	}
	return bin
}

// startDVCR starts a local DVCR on 127.0.0.1 with a certificate of a throwaway CA.
func startDVCR(t testing.TB) registry { return startDVCRIn(t, t.TempDir()) }

// startDVCRIn starts it over dir's storage, which an earlier one may have left.
func startDVCRIn(t testing.TB, dir string) registry {
	t.Helper()
	cert, caPEM := testenv.ServingCert(t, []string{"dvcr.local"}, []net.IP{net.ParseIP("127.0.0.1")})
	certPEM, keyPEM, err := dvcr.PEM(cert)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dvcr.Start(context.Background(), dvcr.Options{Dir: dir, Cert: certPEM, Key: keyPEM, Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	tmp := t.TempDir()
	r := registry{DVCR: d, caFile: filepath.Join(tmp, "dvcr-ca.pem"), roots: x509.NewCertPool(),
		pushAuth: filepath.Join(tmp, "push.json"), pullAuth: filepath.Join(tmp, "pull.json")}
	r.roots.AppendCertsFromPEM(caPEM)
	for path, data := range map[string][]byte{
		r.caFile:   caPEM,
		r.pushAuth: d.Pusher.DockerConfigJSON(d.PushAddr),
		r.pullAuth: d.Puller.DockerConfigJSON(d.PullAddr),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// run runs the importer and returns its result and exit code.
func (f *fixture) run(t *testing.T, args ...string) (contract.Result, int) {
	t.Helper()
	return runImporter(t, f.importer, args...)
}

func runImporter(t testing.TB, importer string, args ...string) (contract.Result, int) {
	t.Helper()
	r := startImporter(context.Background(), importer, t.TempDir(), args...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("importer %s: exit %d, %s\n%s", strings.Join(r.args, " "), r.code, r.message, r.stderr)
	return r.res, r.code
}

// importerRun is one importer's run: what it wrote as its result and how it exited, or why
// there is no result.
type importerRun struct {
	args    []string
	res     contract.Result
	code    int
	message []byte
	stderr  string
	err     error
}

// startImporter runs the importer with its scratch and termination files under dir, until it
// exits or ctx ends (then it is sent SIGTERM). It does not touch a testing.T, so a test may run it in a goroutine.
func startImporter(ctx context.Context, importer, dir string, args ...string) importerRun {
	term, scratch := filepath.Join(dir, "termination-log"), filepath.Join(dir, "scratch")
	r := importerRun{args: append(args, "--"+contract.FlagTerminationMessagePath, term, "--"+contract.FlagScratchDir, scratch, "--"+contract.FlagRetries, "2")}
	if !slices.Contains(args, "--"+contract.FlagMetricsAddress) {
		r.args = append(r.args, "--"+contract.FlagMetricsAddress, "127.0.0.1:0")
	}
	if r.err = os.MkdirAll(scratch, 0o755); r.err != nil {
		return r
	}
	cmd := exec.CommandContext(ctx, importer, r.args...)
	// An ended ctx stops it as kubelet stops a Pod: SIGTERM, then SIGKILL after a grace period.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	r.stderr = stderr.String()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil && ctx.Err() != nil && cmd.ProcessState != nil:
		// Stopped, it exited by itself after the SIGTERM (Wait then reports ctx's error).
		r.code = cmd.ProcessState.ExitCode()
	case err != nil:
		r.err = err
		return r
	}
	if r.message, err = os.ReadFile(term); err != nil {
		r.err = fmt.Errorf("no result (exit %d): %w\n%s", r.code, err, r.stderr)
		return r
	}
	if r.res, err = contract.ParseResult(r.message); err != nil {
		r.err = fmt.Errorf("result %q: %w", r.message, err)
	}
	return r
}

func (f *fixture) url(file string) string { return f.http.URL + "/" + file }

// pull reads the files of a DVCR image through the pull instance with the puller's credentials.
func (f *registry) pull(t testing.TB, repo string, auth authn.Authenticator) (map[string][]byte, error) {
	t.Helper()
	ref, err := name.ParseReference(f.PullAddr + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithAuth(auth), remote.WithTransport(f.transport()))
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			if h.Typeflag == tar.TypeReg {
				files[h.Name], _ = io.ReadAll(tr)
			}
		}
		rc.Close()
	}
	return files, nil
}

func (f *registry) transport() http.RoundTripper {
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.roots}}
}

func (f *registry) puller() authn.Authenticator {
	return &authn.Basic{Username: f.Puller.Username, Password: f.Puller.Password}
}

func (f *registry) toDVCR(repo string) []string {
	return []string{"--" + contract.FlagDestinationImage, f.PushAddr + "/" + repo,
		"--" + contract.FlagDestinationCABundle, f.caFile, "--" + contract.FlagDestinationAuthFile, f.pushAuth}
}

// qcow2ToRaw converts a pulled qcow2 to raw for a comparison.
func qcow2ToRaw(t *testing.T, qcow2 []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.qcow2"), filepath.Join(dir, "out.img")
	os.WriteFile(in, qcow2, 0o600)
	if b, err := exec.Command("qemu-img", "convert", "-f", "qcow2", "-O", "raw", in, out).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, b)
	}
	raw, _ := os.ReadFile(out)
	return raw
}

func TestImporter(t *testing.T) {
	f := setup(t)
	t.Run("to DVCR", func(t *testing.T) { testToDVCR(t, f) })
	t.Run("to a file", func(t *testing.T) { testToFile(t, f) })
	t.Run("failures", func(t *testing.T) { testFailures(t, f) })
	t.Run("DVCR access", func(t *testing.T) { testAccess(t, f) })
	t.Run("progress metrics", func(t *testing.T) { testProgress(t, f) })
	t.Run("upload", func(t *testing.T) { testUpload(t, f) })
	t.Run("export", func(t *testing.T) { testExport(t, f) })
	t.Run("export of an image", func(t *testing.T) { testExportImage(t, f) })
	t.Run("garbage collection", func(t *testing.T) { testGarbageCollection(t, f) })
}

func testToDVCR(t *testing.T, f *fixture) {
	cases := []struct {
		name, file, repo string
		format           string
		disk             string // file in the image
		cdrom            bool
		want             []byte // the disk file's content; nil: compare as raw with f.raw
	}{
		{name: "qcow2 as it is", file: "disk.qcow2", repo: "cvi/guest-qcow2:latest", format: contract.FormatQcow2, disk: "disk/disk.qcow2", want: f.files["disk.qcow2"]},
		{name: "gzipped qcow2", file: "disk.qcow2.gz", repo: "vi/ns1/guest-gz:latest", format: contract.FormatQcow2, disk: "disk/disk.qcow2", want: f.files["disk.qcow2"]},
		{name: "raw, converted to qcow2", file: "disk.img", repo: "cvi/guest-raw:latest", format: contract.FormatRaw, disk: "disk/disk.qcow2"},
		{name: "gzipped raw", file: "disk.img.gz", repo: "cvi/guest-raw-gz:latest", format: contract.FormatRaw, disk: "disk/disk.qcow2"},
		{name: "ISO", file: "cidata.iso", repo: "vi/ns1/cidata:latest", format: contract.FormatISO, disk: "disk/disk.iso", cdrom: true, want: f.files["cidata.iso"]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--" + contract.FlagSourceURL, f.url(tc.file), "--" + contract.FlagSHA256, sha(f.files[tc.file])}, f.toDVCR(tc.repo)...)
			res, code := f.run(t, args...)
			if code != 0 || res.Reason != contract.ReasonCompleted {
				t.Fatalf("exit %d: %+v", code, res)
			}
			if res.Format != tc.format || res.CDROM != tc.cdrom || !strings.HasPrefix(res.Digest, "sha256:") || res.SourceSize != int64(len(f.files[tc.file])) {
				t.Fatalf("result %+v", res)
			}
			files, err := f.pull(t, tc.repo, f.puller())
			if err != nil {
				t.Fatal(err)
			}
			got, ok := files[tc.disk]
			if !ok || len(files) != 1 {
				t.Fatalf("image files %v, want only %s", keys(files), tc.disk)
			}
			if res.StoredSize != int64(len(got)) {
				t.Errorf("storedSize %d, the disk file has %d bytes", res.StoredSize, len(got))
			}
			if tc.want == nil {
				if !bytes.Equal(qcow2ToRaw(t, got), f.raw) {
					t.Fatal("the pulled disk differs from the source")
				}
				if res.UnpackedSize != int64(len(f.raw)) {
					t.Fatalf("unpackedSize %d, want %d", res.UnpackedSize, len(f.raw))
				}
				return
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("the pulled %s (%d bytes) is not the source (%d bytes)", tc.disk, len(got), len(tc.want))
			}
		})
	}
	t.Run("from DVCR into a file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "disk.img")
		res, code := f.run(t, "--"+contract.FlagSourceImage, f.PullAddr+"/cvi/guest-qcow2:latest", "--"+contract.FlagSourceCABundle, f.caFile,
			"--"+contract.FlagSourceAuthFile, f.pullAuth, "--"+contract.FlagDestinationFile, out)
		if code != 0 {
			t.Fatalf("exit %d: %+v", code, res)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, f.raw) {
			t.Fatal("the disk differs from the source")
		}
	})
}

func testToFile(t *testing.T, f *fixture) {
	// The disk is larger than the image: disk.img is the disk's size.
	diskSize := (len(f.raw)>>20 + 8) << 20
	for _, file := range []string{"disk.img", "disk.img.gz", "disk.qcow2", "disk.qcow2.gz"} {
		t.Run(file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "disk.img")
			res, code := f.run(t, "--"+contract.FlagSourceURL, f.url(file), "--"+contract.FlagMD5, md5hex(f.files[file]),
				"--"+contract.FlagDestinationFile, out, "--"+contract.FlagCapacity, strconv.Itoa(diskSize))
			if code != 0 {
				t.Fatalf("exit %d: %+v", code, res)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			// The disk's size, the image first.
			if len(got) != diskSize || !bytes.Equal(got[:len(f.raw)], f.raw) || !bytes.Equal(got[len(f.raw):], make([]byte, diskSize-len(f.raw))) {
				t.Fatalf("disk.img (%d bytes) is not the source (%d bytes) grown to %d bytes", len(got), len(f.raw), diskSize)
			}
			if res.UnpackedSize != int64(len(f.raw)) || res.StoredSize <= 0 || res.StoredSize > int64(len(f.raw))+1<<20 {
				t.Fatalf("result %+v", res)
			}
			if _, err := os.Stat(out + ".importing"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the partial file is left: %v", err)
			}
		})
	}
}

func testFailures(t *testing.T, f *fixture) {
	cases := []struct {
		name   string
		args   []string
		reason contract.Reason
		msg    string
		repo   string // to DVCR: no tag may be left
	}{
		{name: "wrong checksum to DVCR", args: []string{"--" + contract.FlagSourceURL, f.url("disk.qcow2"), "--" + contract.FlagSHA256, sha([]byte("other"))},
			repo: "cvi/wrong-sum:latest", reason: contract.ReasonChecksumMismatch, msg: "sha256 checksum of the downloaded file is " + sha(f.files["disk.qcow2"])},
		{name: "wrong checksum to a file", args: []string{"--" + contract.FlagSourceURL, f.url("disk.img.gz"), "--" + contract.FlagSHA256, sha([]byte("other"))},
			reason: contract.ReasonChecksumMismatch, msg: "checksum"},
		{name: "404", args: []string{"--" + contract.FlagSourceURL, f.url("missing.qcow2")}, repo: "cvi/missing:latest", reason: contract.ReasonSourceNotFound, msg: "404 Not Found"},
		{name: "not an image", args: []string{"--" + contract.FlagSourceURL, f.url("index.html")}, repo: "cvi/html:latest", reason: contract.ReasonNotDiskImage, msg: "text"},
		{name: "not an image to a file", args: []string{"--" + contract.FlagSourceURL, f.url("index.html")}, reason: contract.ReasonNotDiskImage, msg: "not a disk image"},
		{name: "larger than the target (qcow2 header)", args: []string{"--" + contract.FlagSourceURL, f.url("disk.qcow2"), "--" + contract.FlagCapacity, "1048576"},
			reason: contract.ReasonTooLarge, msg: "larger than the destination's 1048576"},
		{name: "larger than the target (gzipped raw)", args: []string{"--" + contract.FlagSourceURL, f.url("disk.img.gz"), "--" + contract.FlagCapacity, "1048576"},
			reason: contract.ReasonTooLarge, msg: "larger than the destination's 1048576"},
		{name: "unreachable", args: []string{"--" + contract.FlagSourceURL, "http://127.0.0.1:1/disk.qcow2"}, reason: contract.ReasonSourceUnreachable, msg: "cannot reach"},
		{name: "no source", args: nil, reason: contract.ReasonInvalidArguments, msg: "exactly one of --source-url, --source-image, --source-file and --source-upload-address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "disk.img")
			args := tc.args
			if tc.repo != "" {
				args = append(args, f.toDVCR(tc.repo)...)
			} else {
				args = append(args, "--"+contract.FlagDestinationFile, out)
			}
			res, code := f.run(t, args...)
			if res.Reason != tc.reason || code != contract.ExitCode(tc.reason) || !strings.Contains(res.Message, tc.msg) {
				t.Fatalf("exit %d, %+v; want %s (exit %d) mentioning %q", code, res, tc.reason, contract.ExitCode(tc.reason), tc.msg)
			}
			if tc.repo != "" {
				if _, err := f.pull(t, tc.repo, f.puller()); err == nil {
					t.Fatalf("a failed import left %s in DVCR", tc.repo)
				}
				return
			}
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*"))
			if len(left) != 0 {
				t.Fatalf("a failed import left %v", left)
			}
		})
	}
}

// testAccess: only the pusher pushes, only the puller (and the pusher) pull.
func testAccess(t *testing.T, f *fixture) {
	t.Run("the puller cannot push", func(t *testing.T) {
		auth := filepath.Join(t.TempDir(), "auth.json")
		os.WriteFile(auth, f.Puller.DockerConfigJSON(f.PullAddr), 0o600)
		res, code := f.run(t, "--"+contract.FlagSourceURL, f.url("disk.qcow2"), "--"+contract.FlagDestinationImage, f.PullAddr+"/cvi/by-puller:latest",
			"--"+contract.FlagDestinationCABundle, f.caFile, "--"+contract.FlagDestinationAuthFile, auth)
		if res.Reason != contract.ReasonDestinationFailed || code != contract.ExitCode(contract.ReasonDestinationFailed) {
			t.Fatalf("exit %d, %+v", code, res)
		}
	})
	t.Run("anonymous cannot pull", func(t *testing.T) {
		if _, err := f.pull(t, "cvi/guest-qcow2:latest", authn.Anonymous); err == nil {
			t.Fatal("pulled without credentials")
		}
	})
	t.Run("the pusher's password does not pull", func(t *testing.T) {
		if _, err := f.pull(t, "cvi/guest-qcow2:latest", &authn.Basic{Username: f.Puller.Username, Password: f.Pusher.Password}); err == nil {
			t.Fatal("pulled with a wrong password")
		}
	})
	t.Run("the pusher cannot pull at the pull address", func(t *testing.T) {
		if _, err := f.pull(t, "cvi/guest-qcow2:latest", &authn.Basic{Username: f.Pusher.Username, Password: f.Pusher.Password}); err == nil {
			t.Fatal("the pusher pulled at the pull address")
		}
	})
	t.Run("DVCR serves metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + f.MetricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "registry_http_requests_total") {
			t.Fatalf("no registry metrics:\n%.500s", b)
		}
	})
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// contextTimeout is for the progress test's waits.
func contextTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
