// Package gomodule fetches a Go module (path@version) into the module cache and finds its
// directory: the module proxy serves a repository's files, such as another project's CRDs.
package gomodule

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
)

// Dir downloads module (path@version) and returns its directory in the module cache.
func Dir(ctx context.Context, module string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", module).Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s %v %v", module, mod.Error, err, jerr)
	}
	return mod.Dir, nil
}
