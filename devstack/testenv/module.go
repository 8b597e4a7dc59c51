package testenv

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// ModuleDir downloads a Go module (path@version) into the module cache and returns its
// directory: the module proxy serves a repository's files, such as another project's CRDs.
func ModuleDir(t testing.TB, module string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %s %v", module, mod.Error, err)
	}
	return mod.Dir
}
