// Package isoimage writes ISO 9660 images of a directory, as the launcher presents configuration
// data to guests (cloud-init data sources, configMap, secret, downwardAPI, serviceAccount and
// sysprep disks). It runs xorriso, or genisoimage when xorriso is missing (hack/install-deps.sh
// installs both).
package isoimage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Write writes an ISO with the contents of dir at its root to path, with the volume label label
// (none when empty), replacing path atomically. Names keep their case and length (Joliet and
// Rock Ridge), and symbolic links are followed: kubelet makes a Pod's configMap and secret files
// links into a directory named "..<timestamp>", which stays off the ISO with every other name
// that starts with "..".
func Write(ctx context.Context, path, label, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("ISO image: %w", err)
	}
	// An empty -V gives an empty label; without it the tools would write their own.
	args := []string{"-quiet", "-J", "-r", "-follow-links", "-graft-points", "-V", label, "-o", path + ".tmp"}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		// A graft point puts a directory's contents under its name, a file at its name.
		args = append(args, escapeGraft(e.Name())+"="+escapeGraft(filepath.Join(dir, e.Name())))
		n++
	}
	if n == 0 {
		// An empty volume is an empty ISO: a path is needed, and the empty directory is one.
		empty, err := os.MkdirTemp(filepath.Dir(path), ".iso-empty-")
		if err != nil {
			return fmt.Errorf("ISO image: %w", err)
		}
		defer os.RemoveAll(empty)
		args = append(args, empty)
	}
	var cmd *exec.Cmd
	if _, err := exec.LookPath("xorriso"); err == nil {
		cmd = exec.CommandContext(ctx, "xorriso", append([]string{"-as", "mkisofs"}, args...)...)
	} else if _, err := exec.LookPath("genisoimage"); err == nil {
		cmd = exec.CommandContext(ctx, "genisoimage", args...)
	} else {
		return errors.New("ISO image: neither xorriso nor genisoimage is installed")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(path + ".tmp")
		return fmt.Errorf("ISO image %s: %s: %w: %s", filepath.Base(path), filepath.Base(cmd.Path), err, out)
	}
	// QEMU may run as another user than the launcher; the ISO's data is the guest's anyway.
	if err := os.Chmod(path+".tmp", 0o644); err != nil {
		return fmt.Errorf("ISO image: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("ISO image: %w", err)
	}
	return nil
}

// escapeGraft escapes what mkisofs's graft points give a meaning: '=' and the backslash.
func escapeGraft(s string) string {
	return strings.NewReplacer(`\`, `\\`, `=`, `\=`).Replace(s)
}

// WriteFiles writes an ISO holding files (path on the ISO to content) to path, labelled label,
// staging them in a directory next to path that it removes afterwards.
func WriteFiles(ctx context.Context, path, label string, files map[string]string) error {
	src, err := os.MkdirTemp(filepath.Dir(path), ".iso-")
	if err != nil {
		return fmt.Errorf("ISO image: %w", err)
	}
	defer os.RemoveAll(src)
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("ISO image: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("ISO image: %w", err)
		}
	}
	return Write(ctx, path, label, src)
}
