package api_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

const staleHint = "the generated files of the api module are stale: run make generate"

// The checked-in deep copies, typed client and CRDs are what hack/generate-api.sh makes from the
// types: the test runs the generators on a copy of the module and compares the trees.
func TestGeneratedFilesUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generators")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	copyTree(t, filepath.Join(repo, "api"), filepath.Join(tmp, "api"))
	cmd := exec.Command(filepath.Join(repo, "hack", "generate-api.sh"), tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/generate-api.sh: %v\n%s", err, out)
	}
	for _, dir := range []string{"api", filepath.Join("crds", "virtualization.deckhouse.io")} {
		want, got := readTree(t, filepath.Join(tmp, dir)), readTree(t, filepath.Join(repo, dir))
		for _, name := range union(want, got) {
			switch w, g := want[name], got[name]; {
			case w == nil:
				t.Errorf("%s: not generated any more (%s)", filepath.Join(dir, name), staleHint)
			case g == nil:
				t.Errorf("%s: missing (%s)", filepath.Join(dir, name), staleHint)
			case !bytes.Equal(w, g):
				t.Errorf("%s: differs (%s)", filepath.Join(dir, name), staleHint)
			}
		}
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	for name, data := range readTree(t, src) {
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree maps the path of every file under dir, relative to dir, to its content.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[rel] = data
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return files
}

func union(a, b map[string][]byte) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
