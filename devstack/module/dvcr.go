package module

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/imagepull"
)

// DVCR as the chart makes it: its Service's pull address (the read-only instance on 443) and push
// address, the Secret with its serving certificate's CA, and the pusher's credentials.
const (
	DVCRPullHost   = "dvcr." + Namespace + ".svc"
	DVCRPushHost   = DVCRPullHost + ":5000"
	dvcrTLSSecret  = "dvcr-tls"
	dvcrPushSecret = "dvcr-pusher"
	dvcrPullSecret = "dvcr-puller"
	// LocalImages is the repository prefix of images pushed by hand (make image-import), apart
	// from the controller's cvi/ and vi/.
	LocalImages = "local"
)

// RegistryConfigPath is the nodes' --registry-config of a stack: which registries they pull from.
func RegistryConfigPath(s *controlplane.Stack) string {
	return filepath.Join(s.Config().StateDir, "registries.json")
}

func dvcrCAPath(s *controlplane.Stack) string {
	return filepath.Join(s.Config().StateDir, "dvcr-ca.crt")
}

func dvcrAuthPath(s *controlplane.Stack) string {
	return filepath.Join(s.Config().StateDir, "dvcr-puller.json")
}

// WriteNodeRegistryConfig configures the stack's nodes for the installed module's DVCR, as a
// platform configures containerd on its nodes (the reference module does it with a
// NodeGroupConfiguration): they trust DVCR's CA (read from the chart's Secret) for its pull
// address and pull with the puller's credentials, so launcher Pods of virtual machines need no
// pull secret. The agents read the file at every pull.
func WriteNodeRegistryConfig(ctx context.Context, s *controlplane.Stack) error {
	kube, _, err := clients(s)
	if err != nil {
		return err
	}
	sec, err := kube.CoreV1().Secrets(Namespace).Get(ctx, dvcrTLSSecret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("DVCR's CA: %w", err)
	}
	ca := sec.Data["ca.crt"]
	if len(ca) == 0 {
		return fmt.Errorf("DVCR's CA: secret %s/%s has no ca.crt", Namespace, dvcrTLSSecret)
	}
	if err := os.WriteFile(dvcrCAPath(s), ca, 0o644); err != nil {
		return err
	}
	pull, err := kube.CoreV1().Secrets(Namespace).Get(ctx, dvcrPullSecret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("DVCR's puller: %w", err)
	}
	if err := os.WriteFile(dvcrAuthPath(s), pull.Data[corev1.DockerConfigJsonKey], 0o600); err != nil {
		return err
	}
	b, err := json.Marshal(imagepull.Hosts{DVCRPullHost: {CA: dvcrCAPath(s), Auth: dvcrAuthPath(s)}})
	if err != nil {
		return err
	}
	tmp := RegistryConfigPath(s) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, RegistryConfigPath(s))
}

// PushContainerDisk pushes disk as the containerDisk image local/<name>:latest into the module's
// DVCR with the pusher's credentials, reaching it by its Service name through the stack's cluster
// DNS, and returns the reference pods pull it by.
func PushContainerDisk(ctx context.Context, s *controlplane.Stack, imageName, disk string) (string, error) {
	kube, _, err := clients(s)
	if err != nil {
		return "", err
	}
	sec, err := kube.CoreV1().Secrets(Namespace).Get(ctx, dvcrPushSecret, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("DVCR's pusher (is the module installed? devcluster module up): %w", err)
	}
	auth, err := imagepull.Authenticator([]*corev1.Secret{sec}, DVCRPushHost)
	if err != nil {
		return "", err
	}
	if auth == authn.Anonymous {
		return "", fmt.Errorf("secret %s/%s has no credentials for %s", Namespace, dvcrPushSecret, DVCRPushHost)
	}
	if err := WriteNodeRegistryConfig(ctx, s); err != nil {
		return "", err
	}
	dial := imagepull.ClusterDialer(net.JoinHostPort(s.Config().ClusterDNSIP().String(), "53"), controlplane.ClusterDomain)
	t, err := imagepull.Transport(imagepull.Host{CA: dvcrCAPath(s)}, dial)
	if err != nil {
		return "", err
	}
	repo := LocalImages + "/" + imageName + ":latest"
	ref, err := name.ParseReference(DVCRPushHost + "/" + repo)
	if err != nil {
		return "", fmt.Errorf("image name %q: %w", imageName, err)
	}
	img, err := imagepull.ContainerDiskImage(disk)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(t)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return DVCRPullHost + "/" + repo, nil
}
