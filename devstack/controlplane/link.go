package controlplane

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// LinkKubeRBACProxy makes kube-rbac-proxy, which hack/build-k8s.sh builds into the machine-wide
// cache, the program of its image in the nodes' bin directory: a hard link where the file
// systems allow it, a copy otherwise.
func LinkKubeRBACProxy(binDir string) error {
	dst := filepath.Join(binDir, "kube-rbac-proxy")
	src := filepath.Join(BinDir(), "kube-rbac-proxy")
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("kube-rbac-proxy is not built (hack/build-k8s.sh builds it): %w", err)
	}
	if old, err := os.Stat(dst); err == nil && (os.SameFile(old, st) || old.Size() == st.Size() && !old.ModTime().Before(st.ModTime())) {
		return nil
	}
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
			return fmt.Errorf("kube-rbac-proxy into %s: %w", binDir, err)
		}
	}
	return os.Rename(tmp, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
