// Package release gives a test an earlier release of the module to upgrade from: its checkout
// (the chart, its values for the local stack, its examples) and the programs its images stand
// for, built once into the machine-wide cache (cachedir) and kept there for every later run.
package release

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/d8virt/devstack/cachedir"
	"github.com/d8virt/devstack/filelock"
	"github.com/d8virt/devstack/module"
)

// Release is a released chart version and the commit it was released from.
type Release struct {
	// Version is the chart's version and appVersion, the tag of its images.
	Version string
	// Commit is the full hash of the commit the release was made from.
	Commit string
	// CoreExample is the release's example VirtualMachine in the core's terms (kubevirt.io/v1),
	// relative to its checkout.
	CoreExample string
}

// Previous is the release before the chart in this checkout: charts/virtualization at version
// 0.1.0, the last commit of main before the chart went to 0.2.0 (docs/chart.md, Upgrades).
var Previous = Release{Version: "0.1.0", Commit: "f198ab233fa20490c54efe5d4d37bc65c18668f7", CoreExample: "examples/vm.yaml"}

// ErrNotInHistory says the repository does not hold the release's commit: a shallow clone, or a
// copy without .git.
var ErrNotInHistory = errors.New("the release's commit is not in the repository's history")

// Tree is a release checked out and built.
type Tree struct {
	Release
	// Src is its checkout: module.Chart(Src), module.ValuesFile(Src), its examples.
	Src string
	// Bin holds the programs of its images (those of module.ImagePackages it has).
	Bin string
}

// Dir is where the release lives in the machine-wide cache.
func (r Release) Dir() string {
	return filepath.Join(cachedir.Root(), "releases", r.Version+"-"+r.Commit[:12])
}

// Prepare checks the release out of the repository at repo (git archive of its commit) and
// builds its programs, unless an earlier run has: the result is only moved into place once
// complete, under a lock, so a run that was killed half-way leaves nothing that looks done.
func Prepare(ctx context.Context, repo string, r Release) (Tree, error) {
	t := Tree{Release: r, Src: filepath.Join(r.Dir(), "src"), Bin: filepath.Join(r.Dir(), "bin")}
	if done(t) {
		return t, nil
	}
	if err := os.MkdirAll(filepath.Dir(r.Dir()), 0o755); err != nil {
		return Tree{}, err
	}
	unlock, err := filelock.Lock(r.Dir() + ".lock")
	if err != nil {
		return Tree{}, err
	}
	defer unlock()
	if done(t) {
		return t, nil
	}
	work, err := os.MkdirTemp(filepath.Dir(r.Dir()), "."+filepath.Base(r.Dir())+"-")
	if err != nil {
		return Tree{}, err
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	if err := checkout(ctx, repo, r.Commit, src); err != nil {
		return Tree{}, fmt.Errorf("release %s: %w", r.Version, err)
	}
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-o", filepath.Join(work, "bin") + "/"}, packagesIn(src)...)...)
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return Tree{}, fmt.Errorf("release %s: build its programs: %w\n%s", r.Version, err, out)
	}
	// MkdirTemp made it private; the release is the machine's, as the rest of the cache.
	if err := os.Chmod(work, 0o755); err != nil {
		return Tree{}, err
	}
	if err := os.RemoveAll(r.Dir()); err != nil {
		return Tree{}, err
	}
	if err := os.Rename(work, r.Dir()); err != nil {
		return Tree{}, err
	}
	return t, nil
}

// packagesIn are the module.ImagePackages the checkout at src has: a program added since the
// release (container-disk, since 0.2.0) is not part of it.
func packagesIn(src string) []string {
	var out []string
	for _, p := range module.ImagePackages {
		if _, err := os.Stat(filepath.Join(src, p)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// done says whether every program of the release is built.
func done(t Tree) bool {
	for _, p := range packagesIn(t.Src) {
		if _, err := os.Stat(filepath.Join(t.Bin, filepath.Base(p))); err != nil {
			return false
		}
	}
	_, err := os.Stat(module.Chart(t.Src))
	return err == nil
}

// checkout writes the commit's files into dir. A shallow clone lacks the commit: the error says
// how to get it.
func checkout(ctx context.Context, repo, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("%w: commit %s, repository %s (a shallow clone? git fetch --unshallow): %v: %s", ErrNotInHistory, commit, repo, err, strings.TrimSpace(string(out)))
	}
	tar := filepath.Join(filepath.Dir(dir), "src.tar")
	if out, err := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", "--output", tar, commit).CombinedOutput(); err != nil {
		return fmt.Errorf("git archive %s: %w\n%s", commit, err, out)
	}
	if out, err := exec.CommandContext(ctx, "tar", "-x", "-f", tar, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("tar -x: %w\n%s", err, out)
	}
	return os.Remove(tar)
}
