package integration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/dvcr"
	"github.com/d8virt/devstack/imagepull"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/testenv"
)

// TestImagePull has a node agent pull a containerDisk image from a real registry with
// authentication (a local DVCR: distribution v3's registry with TLS from a throwaway CA, which
// the agent trusts through --registry-config): with the puller's secret the pod starts, sees the
// disk under /disk and the disk lands in the image store; a wrong secret leaves the container
// waiting in ErrImagePull with the registry's refusal; Never does not pull at all.
func TestImagePull(t *testing.T) {
	env := testenv.Get(t)
	for _, bin := range []string{dvcr.Binary, "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing from PATH: make deps builds the registry, hack/install-deps.sh installs qemu-img", bin)
		}
	}
	ctx := testenv.Context(t)
	cert, caPEM := testenv.ServingCert(t, []string{"dvcr.local"}, []net.IP{net.ParseIP("127.0.0.1")})
	certPEM, keyPEM, err := dvcr.PEM(cert)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dvcr.Start(ctx, dvcr.Options{Dir: t.TempDir(), Cert: certPEM, Key: keyPEM, Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)

	// A containerDisk image: one layer with disk/disk.qcow2, pushed with the pusher's credentials.
	work := t.TempDir()
	disk := filepath.Join(work, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	diskBytes, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	img, err := imagepull.ContainerDiskImage(disk)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	pushRef, err := name.ParseReference(reg.PushAddr + "/cvi/pulltest:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(pushRef, img, remote.WithContext(ctx), remote.WithTransport(transport),
		remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: reg.Pusher.Username, Password: reg.Pusher.Password}))); err != nil {
		t.Fatalf("push the containerDisk image: %v", err)
	}
	digest, _ := img.Digest()
	image := reg.PullAddr + "/cvi/pulltest:v1"

	caFile := filepath.Join(work, "ca.pem")
	hosts, _ := json.Marshal(map[string]any{reg.PullAddr: map[string]string{"ca": caFile}})
	regConfig := filepath.Join(work, "registries.json")
	for f, b := range map[string][]byte{caFile: caPEM, regConfig: hosts} {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(work, "store")
	s, a := oneAgent(t, env, "pull", "--registry-config", regConfig, "--image-store", store)
	s.ns = env.Namespace(t)
	for secret, creds := range map[string]dvcr.Credentials{"good": reg.Puller, "wrong": {Username: reg.Puller.Username, Password: "not-the-password"}} {
		if _, err := env.Kube.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secret}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: creds.DockerConfigJSON(reg.PullAddr)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(podName, secret string, policy corev1.PullPolicy) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName}, Spec: corev1.PodSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: secret}},
			Containers: []corev1.Container{{Name: "disk", Image: image, ImagePullPolicy: policy,
				Command:      []string{"/bin/sh", "-c", "ls /disk > /out/ls.tmp && mv /out/ls.tmp /out/ls; exec sleep 100000"},
				VolumeMounts: []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}}},
			Volumes: []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}
	}
	waiting := func(reason string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			st := ctrStatus(p, "disk")
			return st != nil && st.State.Waiting != nil && st.State.Waiting.Reason == reason
		}
	}

	t.Run("Never", func(t *testing.T) {
		s.create(t, pod("never", "good", corev1.PullNever))
		p := s.waitPod(t, "never", "ErrImageNeverPull", waiting("ErrImageNeverPull"))
		if msg := ctrStatus(p, "disk").State.Waiting.Message; !strings.Contains(msg, "not present with pull policy of Never") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("WrongSecret", func(t *testing.T) {
		s.create(t, pod("wrong", "wrong", corev1.PullIfNotPresent))
		p := s.waitPod(t, "wrong", "ErrImagePull", waiting("ErrImagePull"))
		if msg := ctrStatus(p, "disk").State.Waiting.Message; !strings.Contains(msg, "UNAUTHORIZED") {
			t.Errorf("message %q does not carry the registry's refusal", msg)
		}
	})
	t.Run("PulledAndStarted", func(t *testing.T) {
		s.create(t, pod("good", "good", corev1.PullIfNotPresent))
		p := s.waitPod(t, "good", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		if id := ctrStatus(p, "disk").ImageID; id != digest.String() {
			t.Errorf("imageID %q, want the manifest digest %s", id, digest)
		}
		out := nodeagent.Layout{Root: a.root}.EmptyDirPath(p.UID, "out")
		if got := waitFile(t, filepath.Join(out, "ls"), func(string) bool { return true }); strings.TrimSpace(got) != "disk.qcow2" {
			t.Errorf("the container sees /disk: %q", got)
		}
		published, err := os.ReadFile(nodeagent.ImagePath(store, image))
		if err != nil || !bytes.Equal(published, diskBytes) {
			t.Errorf("the image store's disk of %s: %d bytes, %v; want the pushed %d", image, len(published), err, len(diskBytes))
		}
		evs, err := env.Kube.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=good,reason=Pulled"})
		if err != nil || len(evs.Items) == 0 {
			t.Errorf("no Pulled event: %v", err)
		}
	})
}
