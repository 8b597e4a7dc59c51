package testenv

import (
	"testing"

	"github.com/d8virt/devstack/gomodule"
)

// ModuleDir downloads a Go module (path@version) into the module cache and returns its
// directory (gomodule.Dir), failing the test when it cannot.
func ModuleDir(t testing.TB, module string) string {
	t.Helper()
	dir, err := gomodule.Dir(Context(t), module)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
