// Package registryauth reads a .dockerconfigjson (the payload of a Kubernetes Secret of type
// kubernetes.io/dockerconfigjson, mounted as a file) into a go-containerregistry Keychain.
package registryauth

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Keychain answers with the credentials of the registry a resource is on; anonymous for others.
type Keychain map[string]authn.AuthConfig

type dockerConfig struct {
	Auths map[string]struct {
		Auth     string `json:"auth"`
		Username string `json:"username"`
		Password string `json:"password"`
	} `json:"auths"`
}

// Parse reads a .dockerconfigjson. Keys may be host[:port] or URLs (https://host/v1/).
func Parse(b []byte) (Keychain, error) {
	var c dockerConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not a .dockerconfigjson: %w", err)
	}
	k := Keychain{}
	for key, a := range c.Auths {
		ac := authn.AuthConfig{Username: a.Username, Password: a.Password}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf(".dockerconfigjson auths[%q].auth: not base64: %w", key, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return nil, fmt.Errorf(".dockerconfigjson auths[%q].auth: not user:password", key)
			}
			ac.Username, ac.Password = user, pass
		}
		k[host(key)] = ac
	}
	return k, nil
}

// Load reads a .dockerconfigjson file.
func Load(path string) (Keychain, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	k, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	return k, nil
}

func host(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	h, _, _ := strings.Cut(key, "/")
	return h
}

// Resolve implements authn.Keychain.
func (k Keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if ac, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(ac), nil
	}
	return authn.Anonymous, nil
}
