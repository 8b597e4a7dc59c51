// Package htpasswd writes the htpasswd file each of DVCR's registries checks every request
// against. distribution's htpasswd takes bcrypt only, and checks it on every request: at helm's
// cost (10) that is about 56 ms of CPU a request, some 0.3 s an import's push and more for every
// image pull. The chart's passwords are 32 random characters (about 190 bits): no cost makes
// guessing them easier or harder, so the file is written at bcrypt's least cost.
package htpasswd

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/d8virt/virtualization-controller/pkg/importer/registryauth"
)

// Cost is the bcrypt cost of the lines written.
const Cost = bcrypt.MinCost

// Line is user's htpasswd line for password (without its line end).
func Line(user, password string) (string, error) {
	if user == "" || strings.ContainsAny(user, ":\n") || password == "" {
		return "", fmt.Errorf("htpasswd: user %q: a user without ':' and a password are needed", user)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), Cost)
	if err != nil {
		return "", fmt.Errorf("htpasswd: %w", err)
	}
	return user + ":" + string(hash), nil
}

// FromDockerConfig is the htpasswd file of the users of a .dockerconfigjson (a DVCR user's
// Secret): one line each, by user.
func FromDockerConfig(b []byte) ([]byte, error) {
	k, err := registryauth.Parse(b)
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	for host, a := range k {
		if p, ok := users[a.Username]; ok && p != a.Password {
			return nil, fmt.Errorf("htpasswd: user %q has two passwords (at %s)", a.Username, host)
		}
		users[a.Username] = a.Password
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("htpasswd: the .dockerconfigjson has no credentials")
	}
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	var out strings.Builder
	for _, u := range names {
		line, err := Line(u, users[u])
		if err != nil {
			return nil, err
		}
		out.WriteString(line + "\n")
	}
	return []byte(out.String()), nil
}
