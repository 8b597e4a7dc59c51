package nodeagent

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// prepareRootfs gives the attempt fresh private directories, seeded from the host where asked.
func (r *podRuntime) prepareRootfs(c *ctr) error {
	root := filepath.Join(c.dir, rootfsDir)
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	for _, d := range r.p.cfg.PrivateDirs {
		dst := filepath.Join(root, d.Path)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if st, err := os.Stat(d.Path); err == nil && st.IsDir() {
			if err := os.Chmod(dst, st.Mode().Perm()|st.Mode()&(fs.ModeSticky)); err != nil {
				return err
			}
			if d.Seed {
				if err := copyTree(d.Path, dst); err != nil {
					return fmt.Errorf("seed %s: %w", d.Path, err)
				}
			}
		}
	}
	return nil
}

// copyTree copies a directory's contents (directories, regular files, symlinks) with their modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm())
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil // sockets, devices, fifos stay behind
	})
}
