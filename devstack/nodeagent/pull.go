package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/imagepull"
)

// ContainerDiskDir is where a containerDisk image keeps its disk, as KubeVirt's layout has it.
const ContainerDiskDir = "/disk"

// pullState is what the last pull of a container's image left.
type pullState struct {
	// err is the registry's refusal (or the policy's, with never set); failures counts pulls
	// that failed in a row.
	err      string
	never    bool
	failures int
	// rootfs and digest are the unpacked image of the current attempt.
	rootfs, digest string
}

// pullBackoff is kubelet's image back-off: the initial container back-off, doubled per failure,
// capped at the maximum.
func pullBackoff(initial, maxDelay time.Duration, failures int) time.Duration {
	d := initial
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// pullImage pulls a container's image from one of the node's registries as its policy says,
// with the pod's imagePullSecrets, and publishes a containerDisk image's disk into the image
// store, where virt-launcher reads it.
func (r *podRuntime) pullImage(ctx context.Context, pod *corev1.Pod, spec *corev1.Container) (imagepull.Image, error) {
	cached, ok := r.p.puller.Cached(spec.Image)
	pull, err := imagepull.Decide(spec.ImagePullPolicy, spec.Image, ok)
	if err != nil || !pull {
		return cached, err
	}
	reg, err := imagepull.Registry(spec.Image)
	if err != nil {
		return imagepull.Image{}, err
	}
	var secrets []*corev1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := r.p.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			// kubelet goes on without a secret it cannot read; the registry then decides.
			r.log.Warn("imagePullSecret not readable", "secret", ref.Name, "err", err)
			continue
		}
		secrets = append(secrets, s)
	}
	auth, err := imagepull.Authenticator(secrets, reg)
	if err != nil {
		return imagepull.Image{}, err
	}
	if auth == authn.Anonymous {
		// Without the pod's credentials the node's own apply, as kubelet falls back to its config.
		host, _, err := r.p.puller.Host(spec.Image)
		if err != nil {
			return imagepull.Image{}, err
		}
		if auth, err = imagepull.NodeAuthenticator(host, reg); err != nil {
			return imagepull.Image{}, err
		}
	}
	r.event(corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", spec.Image))
	start := time.Now()
	img, err := r.p.puller.Pull(ctx, spec.Image, auth)
	if err != nil {
		return imagepull.Image{}, err
	}
	r.event(corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q (%s) in %s", spec.Image, img.Digest, time.Since(start).Round(time.Millisecond)))
	if err := r.publishDisk(spec.Image, img); err != nil {
		return imagepull.Image{}, err
	}
	return img, nil
}

// publishDisk puts the qcow2 under /disk/ of a containerDisk image into the node's image store
// (ImagePath); an image without one is not a containerDisk and has nothing to publish.
func (r *podRuntime) publishDisk(image string, img imagepull.Image) error {
	if r.p.cfg.ImageStore == "" {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(img.Rootfs, ContainerDiskDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		disk := filepath.Join(img.Rootfs, ContainerDiskDir, e.Name())
		if !isQcow2(disk) {
			r.log.Warn("containerDisk is not qcow2, not published to the image store", "image", image, "disk", disk)
			continue
		}
		if err := PublishImage(r.p.cfg.ImageStore, image, img.Digest, disk); err != nil {
			return fmt.Errorf("publish the disk of %s: %w", image, err)
		}
		r.log.Info("containerDisk published", "image", image, "digest", img.Digest, "path", ImagePath(r.p.cfg.ImageStore, image))
		return nil
	}
	return nil
}

func isQcow2(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "QFI\xfb"
}
