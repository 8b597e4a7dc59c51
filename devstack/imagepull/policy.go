// Package imagepull pulls container images from registries for the local stack's node agent, as
// kubelet with a container runtime would: the pull policy, credentials from imagePullSecrets,
// per-registry TLS trust (what containerd's hosts.toml configures on a node), and a cache of
// unpacked root file systems keyed by manifest digest.
package imagepull

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// ErrNeverPull is the refusal of a Never policy for an image that is not on the node (kubelet's
// ErrImageNeverPull).
var ErrNeverPull = errors.New("ErrImageNeverPull")

// Decide says whether to pull: Always pulls, IfNotPresent pulls what is not cached, Never pulls
// nothing and fails for an image that is not cached. An unset policy is the apiserver's default:
// Always for :latest or no tag, else IfNotPresent.
func Decide(policy corev1.PullPolicy, image string, cached bool) (bool, error) {
	if policy == "" {
		policy = corev1.PullIfNotPresent
		if ref, err := name.ParseReference(image); err == nil {
			if tag, ok := ref.(name.Tag); ok && tag.TagStr() == name.DefaultTag {
				policy = corev1.PullAlways
			}
		}
	}
	switch policy {
	case corev1.PullAlways:
		return true, nil
	case corev1.PullIfNotPresent:
		return !cached, nil
	case corev1.PullNever:
		if !cached {
			return false, fmt.Errorf("%w: container image %q is not present with pull policy of Never", ErrNeverPull, image)
		}
		return false, nil
	}
	return false, fmt.Errorf("imagePullPolicy %q: want Always, IfNotPresent or Never", policy)
}

// dockerConfig is .dockerconfigjson (and, under "auths", what .dockercfg holds at its top).
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// Authenticator finds the credentials for registry (host[:port]) in pull secrets of type
// kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg, the first secret that names the
// registry winning, as kubelet tries them. Without one the pull is anonymous.
func Authenticator(secrets []*corev1.Secret, registry string) (authn.Authenticator, error) {
	for _, s := range secrets {
		var cfg dockerConfig
		switch s.Type {
		case corev1.SecretTypeDockerConfigJson:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
				return nil, fmt.Errorf("imagePullSecret %s: %s: %w", s.Name, corev1.DockerConfigJsonKey, err)
			}
		case corev1.SecretTypeDockercfg:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &cfg.Auths); err != nil {
				return nil, fmt.Errorf("imagePullSecret %s: %s: %w", s.Name, corev1.DockerConfigKey, err)
			}
		default:
			continue
		}
		a, err := cfg.authenticator(registry)
		if err != nil {
			return nil, fmt.Errorf("imagePullSecret %s: %w", s.Name, err)
		}
		if a != nil {
			return a, nil
		}
	}
	return authn.Anonymous, nil
}

// authenticator is the config's credentials for registry, nil without any.
func (cfg dockerConfig) authenticator(registry string) (authn.Authenticator, error) {
	for host, a := range cfg.Auths {
		if normalizeHost(host) != registry {
			continue
		}
		user, pass := a.Username, a.Password
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("auth of %s: %w", host, err)
			}
			u, p, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf("auth of %s is not user:password", host)
			}
			user, pass = u, p
		}
		return authn.FromConfig(authn.AuthConfig{Username: user, Password: pass}), nil
	}
	return nil, nil
}

// NodeAuthenticator is the node's own credentials for registry: those of h's auth file (a
// .dockerconfigjson, as kubelet's config.json), used when the pod's pull secrets have none, as a
// platform gives its nodes credentials for its own registry. Without one the pull is anonymous.
func NodeAuthenticator(h Host, registry string) (authn.Authenticator, error) {
	if h.Auth == "" {
		return authn.Anonymous, nil
	}
	b, err := os.ReadFile(h.Auth)
	if err != nil {
		return nil, fmt.Errorf("node credentials: %w", err)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("node credentials %s: %w", h.Auth, err)
	}
	a, err := cfg.authenticator(registry)
	if err != nil || a == nil {
		return authn.Anonymous, err
	}
	return a, nil
}

// normalizeHost turns a docker config key ("https://host:5000/v1/", "host:5000") into host:port.
func normalizeHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, _, _ := strings.Cut(key, "/")
	return host
}
