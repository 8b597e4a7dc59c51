package module

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/friendlyvm"
	"github.com/d8virt/devstack/module"
)

// imagesNamespace holds the test's VirtualImages.
const imagesNamespace = "module-e2e-images"

// checkImageImports imports through the chart's virtualization-controller, importer Pods and
// DVCR: HTTP sources into cvis (right and wrong checksums, a 404, a page that is no image), an
// ISO into a vi, a vi from a cvi, a vi from a registry with a pull secret and a CA bundle, and an
// upload with curl -T; failures leave no importer Pod and no tag in DVCR.
func checkImageImports(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	t.Log("virtualization-controller imports images into DVCR")
	kc := st.s.KubeconfigPath()
	g := friendlyvm.ServeGuestFiles(t, ctx)
	d := dvcrAccess(t, ctx, st)
	st.kubectl(t, kc, "create", "namespace", imagesNamespace)
	defer st.kubectl(t, kc, "delete", "namespace", imagesNamespace, "--wait=false")
	pusherAuth, err := st.kube.CoreV1().Secrets(module.Namespace).Get(ctx, "dvcr-pusher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dvcrHost := "dvcr." + module.Namespace + ".svc"
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: dvcr-creds, namespace: %[1]s}
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: %[2]s
`, imagesNamespace, base64.StdEncoding.EncodeToString(pusherAuth.Data[".dockerconfigjson"]))
	cvi := func(n, source string) {
		manifest += fmt.Sprintf("---\napiVersion: virtualization.deckhouse.io/v1alpha2\nkind: ClusterVirtualImage\nmetadata: {name: %s}\nspec:\n  dataSource:%s\n", n, source)
	}
	vi := func(n, source string) {
		manifest += fmt.Sprintf("---\napiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualImage\nmetadata: {name: %s, namespace: %s}\nspec:\n  storage: ContainerRegistry\n  dataSource:%s\n", n, imagesNamespace, source)
	}
	cvi("e2e-qcow2", g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2")))
	cvi("e2e-gz", g.HTTPSource("disk.qcow2.gz", g.SHA256("disk.qcow2.gz")))
	cvi("e2e-wrong-sum", g.HTTPSource("disk.qcow2", strings.Repeat("0", 64)))
	cvi("e2e-404", g.HTTPSource("missing.qcow2", strings.Repeat("0", 64)))
	cvi("e2e-html", g.HTTPSource("index.html", g.SHA256("index.html")))
	vi("e2e-iso", g.HTTPSource("cidata.iso", g.SHA256("cidata.iso")))
	vi("e2e-from-cvi", "\n    type: ObjectRef\n    objectRef: {kind: ClusterVirtualImage, name: e2e-qcow2}")
	vi("e2e-upload", "\n    type: Upload")
	// The images go while the controller runs: it removes their finalizers.
	var files []string
	defer func() {
		for i := len(files) - 1; i >= 0; i-- {
			st.kubectl(t, kc, "delete", "-f", files[i], "--ignore-not-found", "--timeout=2m")
		}
	}()
	apply := func() {
		file := filepath.Join(t.TempDir(), fmt.Sprintf("images-%d.yaml", len(files)))
		if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		st.kubectl(t, kc, "apply", "-f", file)
		files = append(files, file)
		manifest = ""
	}
	apply()

	get := func(ref, path string) string {
		return st.kubectl(t, kc, "get", "-n", imagesNamespace, ref, "-o", "jsonpath="+path)
	}
	wait := func(ref, phase string) {
		st.kubectl(t, kc, "wait", "-n", imagesNamespace, ref, "--for=jsonpath={.status.phase}="+phase, "--timeout=4m")
	}

	t.Log("HTTP: Ready with format, size, progress and registry URL; the disk in DVCR is the source")
	for _, n := range []string{"e2e-qcow2", "e2e-gz"} {
		wait("cvi/"+n, "Ready")
		if got := get("cvi/"+n, "{.status.format} {.status.progress} {.status.size.unpackedBytes} {.status.target.registryURL}"); got != fmt.Sprintf("qcow2 100%% 26214400 %s/cvi/%s:latest", dvcrHost, n) {
			t.Errorf("cvi/%s status: %s", n, got)
		}
	}
	if disk := pullDisk(t, ctx, d, "cvi/e2e-qcow2:latest"); !bytes.Equal(disk, g.Files["disk.qcow2"]) {
		t.Errorf("DVCR's cvi/e2e-qcow2 holds %d bytes, not the %d served", len(disk), len(g.Files["disk.qcow2"]))
	}

	// A registry source is read when it is created: the image it names must be there by then.
	vi("e2e-registry", fmt.Sprintf("\n    type: ContainerImage\n    containerImage:\n      image: %s:5000/cvi/e2e-gz:latest\n      imagePullSecret: {name: dvcr-creds}\n      caBundle: %s",
		dvcrHost, base64.StdEncoding.EncodeToString(d.caPEM)))
	apply()

	t.Log("a wrong checksum, a 404 and a page that is no image each end Failed with their reason, leaving nothing")
	for n, reason := range map[string]string{"e2e-wrong-sum": "ChecksumMismatch", "e2e-404": "SourceNotFound", "e2e-html": "NotDiskImage"} {
		wait("cvi/"+n, "Failed")
		if msg := get("cvi/"+n, `{.status.conditions[?(@.type=="Ready")].message}`); !strings.HasPrefix(msg, reason+": ") {
			t.Errorf("cvi/%s: Ready message %q, want %s", n, msg, reason)
		}
		waitNoImporter(t, st, get("cvi/"+n, "{.metadata.uid}"))
		if _, err := remote.Head(ref(t, d, "cvi/"+n+":latest"), remote.WithAuth(d.pusher), remote.WithTransport(d.tr), remote.WithContext(ctx)); err == nil {
			t.Errorf("a failed import left cvi/%s in DVCR", n)
		}
	}
	if out := st.kubectl(t, kc, "get", "events", "--field-selector", "involvedObject.name=e2e-wrong-sum", "-o", "jsonpath={.items[*].type}"); !strings.Contains(out, "Warning") {
		t.Errorf("no Warning event for a failed import: %q", out)
	}

	t.Log("an ISO becomes a vi with cdrom true; a vi from a cvi; a vi from a registry with a pull secret and a CA bundle")
	wait("vi/e2e-iso", "Ready")
	if got := get("vi/e2e-iso", "{.status.format} {.status.cdrom} {.status.target.registryURL}"); got != "iso true "+dvcrHost+"/vi/"+imagesNamespace+"/e2e-iso:latest" {
		t.Errorf("vi/e2e-iso status: %s", got)
	}
	for _, n := range []string{"e2e-from-cvi", "e2e-registry"} {
		wait("vi/"+n, "Ready")
		if got := get("vi/"+n, "{.status.format} {.status.size.unpackedBytes}"); got != "qcow2 26214400" {
			t.Errorf("vi/%s status: %s", n, got)
		}
	}
	if got, want := get("vi/e2e-from-cvi", "{.status.sourceUID}"), get("cvi/e2e-qcow2", "{.metadata.uid}"); got != want {
		t.Errorf("vi/e2e-from-cvi sourceUID %s, want %s", got, want)
	}
	if disk := pullDisk(t, ctx, d, "vi/"+imagesNamespace+"/e2e-registry:latest"); !bytes.Equal(disk, g.Files["disk.qcow2"]) {
		t.Errorf("vi/e2e-registry holds %d bytes, not the guest's %d", len(disk), len(g.Files["disk.qcow2"]))
	}

	t.Log("an upload: WaitForUserUpload with its URL; a wrong token is refused, curl -T with the right one reaches Ready")
	wait("vi/e2e-upload", "WaitForUserUpload")
	if u := get("vi/e2e-upload", "{.status.imageUploadURLs.inCluster}"); !strings.HasPrefix(u, "http://vi-upload-") || !strings.HasSuffix(u, "."+module.Namespace+".svc/upload") {
		t.Errorf("upload URL %q", u)
	}
	token := get("vi/e2e-upload", `{.metadata.annotations.virtualization\.deckhouse\.io/upload-token}`)
	uid := get("vi/e2e-upload", "{.metadata.uid}")
	disk := filepath.Join(t.TempDir(), "disk.qcow2")
	if err := os.WriteFile(disk, g.Files["disk.qcow2"], 0o600); err != nil {
		t.Fatal(err)
	}
	// The host reaches cluster IPs; it does not resolve Service names, so curl is told the one.
	url := get("vi/e2e-upload", "{.status.imageUploadURLs.inCluster}")
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/upload")
	ip := st.kubectl(t, kc, "-n", module.Namespace, "get", "service", strings.Split(host, ".")[0], "-o", "jsonpath={.spec.clusterIP}")
	resolve := host + ":80:" + ip
	// The Service answers once the uploader Pod is ready: until then a connection is closed.
	deadline := time.Now().Add(2 * time.Minute)
	code := curlT(t, disk, "not-"+token, url, resolve)
	for ; code == "" && time.Now().Before(deadline); code = curlT(t, disk, "not-"+token, url, resolve) {
		time.Sleep(2 * time.Second)
	}
	if code != "403" {
		t.Errorf("a wrong token: HTTP %s", code)
	}
	// The local stack's uploaders are NodePort Services: the external URL is reached as it is.
	ext := get("vi/e2e-upload", "{.status.imageUploadURLs.external}")
	if !strings.HasPrefix(ext, "http://") || !strings.HasSuffix(ext, "/upload") {
		t.Fatalf("external upload URL %q", ext)
	}
	if code := curlT(t, disk, token, ext, ""); code != "200" {
		t.Errorf("the upload to %s: HTTP %s", ext, code)
	}
	wait("vi/e2e-upload", "Ready")
	waitNoImporter(t, st, uid)

	if out := st.kubectl(t, kc, "get", "-n", imagesNamespace, "vi,cvi", "-o", "wide"); !strings.Contains(out, "PHASE") || !strings.Contains(out, "CDROM") ||
		!strings.Contains(out, "REGISTRY URL") || !strings.Contains(out, "e2e-iso") || !strings.Contains(out, "e2e-qcow2") {
		t.Errorf("kubectl get vi,cvi -o wide:\n%s", out)
	}
}

func ref(t *testing.T, d dvcr, repoTag string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(net.JoinHostPort(d.ip, "5000") + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pullDisk is the disk file under disk/ of an image in DVCR.
func pullDisk(t *testing.T, ctx context.Context, d dvcr, repoTag string) []byte {
	t.Helper()
	img, err := remote.Image(ref(t, d, repoTag), remote.WithAuth(d.pusher), remote.WithTransport(d.tr), remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pull %s: %v", repoTag, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: layers %d %v", repoTag, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return untarDisk(t, rc)
}

// waitNoImporter waits until the image with uid has no importer Pod, Secret or Service.
func waitNoImporter(t *testing.T, st *stack, uid string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out := st.kubectl(t, st.s.KubeconfigPath(), "-n", module.Namespace, "get", "pods,secrets,services", "-l", "virtualization.deckhouse.io/image-uid="+uid, "-o", "name")
		if out == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the importer of %s is left: %s", uid, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// curlT is `curl -T file -H "Authorization: Bearer token" --resolve resolve url`'s HTTP status
// (no --resolve when resolve is empty);
// "" when the connection was closed without an answer (curl's exit 52).
func curlT(t *testing.T, file, token, url, resolve string) string {
	t.Helper()
	args := []string{"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", file, "-H", "Authorization: Bearer " + token, url}
	if resolve != "" {
		args = append([]string{"--resolve", resolve}, args...)
	}
	out, err := exec.Command("curl", args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 52 {
		return ""
	}
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// untarDisk is the one file under disk/ in a container disk's layer.
func untarDisk(t *testing.T, r io.Reader) []byte {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no disk/ file in the layer: %v", err)
		}
		if h.Typeflag == tar.TypeReg && strings.HasPrefix(h.Name, "disk/") {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
