package release

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d8virt/devstack/module"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestCheckout writes exactly the commit's files, not the work tree's, and names a missing
// commit as such.
func TestCheckout(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "Chart.yaml"), []byte("version: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "first")
	first := git(t, repo, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(repo, "Chart.yaml"), []byte("version: 0.2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-q", "-am", "second")

	dir := filepath.Join(t.TempDir(), "src")
	if err := checkout(context.Background(), repo, first, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil || string(b) != "version: 0.1.0\n" {
		t.Fatalf("checked out Chart.yaml: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "src.tar")); !os.IsNotExist(err) {
		t.Fatalf("the archive is left behind: %v", err)
	}

	err = checkout(context.Background(), repo, strings.Repeat("0", 40), filepath.Join(t.TempDir(), "src"))
	if !errors.Is(err, ErrNotInHistory) {
		t.Fatalf("a missing commit: %v", err)
	}
}

func TestPreviousIsAFullCommit(t *testing.T) {
	if len(Previous.Commit) != 40 || strings.Trim(Previous.Commit, "0123456789abcdef") != "" {
		t.Fatalf("Previous.Commit %q is not a full hash", Previous.Commit)
	}
	if Previous.Version == "" || Previous.CoreExample == "" {
		t.Fatalf("Previous %+v", Previous)
	}
}

// TestPackagesIn: a release is built from the image packages its checkout has; one added since
// (container-disk) is left out rather than failing the build.
func TestPackagesIn(t *testing.T) {
	src := t.TempDir()
	var have []string
	for _, p := range module.ImagePackages {
		if p == "./kubevirt-core/cmd/container-disk" {
			continue
		}
		have = append(have, p)
		if err := os.MkdirAll(filepath.Join(src, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := packagesIn(src); strings.Join(got, " ") != strings.Join(have, " ") {
		t.Errorf("packagesIn = %v, want %v", got, have)
	}
	if got := packagesIn(filepath.Join(src, "none")); len(got) != 0 {
		t.Errorf("packagesIn of no checkout = %v", got)
	}
}
