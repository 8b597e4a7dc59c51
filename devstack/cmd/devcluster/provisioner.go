package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/d8virt/devstack/provisioner"
)

// provisionerMarker records which local-provisioner binary a stack runs. The stack knows its
// daemons by their executable's path, and checkouts side by side each have their own bin/: the
// one that started the stack is the one that up, down and status of any checkout look for.
const provisionerMarker = "local-provisioner.bin"

// provisionerBinary is the recorded binary if it is still there, else def (record says whether
// to record def: commands that start the stack do, others leave a stack's state alone).
func provisionerBinary(stateDir, def string, record bool) (string, error) {
	marker := filepath.Join(stateDir, provisionerMarker)
	b, err := os.ReadFile(marker)
	switch {
	case err == nil:
		if p := strings.TrimSpace(string(b)); p != "" {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s: %w", marker, err)
	}
	if !record {
		return def, nil
	}
	if _, err := os.Stat(def); err != nil {
		return "", fmt.Errorf("%s missing (run make build): %w", def, err)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(marker, []byte(def+"\n"), 0o644); err != nil {
		return "", err
	}
	return def, nil
}

// defaultProvisionerBinary is local-provisioner in binDir, made absolute.
func defaultProvisionerBinary(binDir string) (string, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(abs, provisioner.Daemon), nil
}
