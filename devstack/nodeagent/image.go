package nodeagent

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/d8virt/devstack/filelock"
)

// ImageBinaryName is the program that stands in for an image: the last path element of the image
// repository, without tag or digest ("registry.example/d8v/virt-launcher:dev" -> "virt-launcher").
func ImageBinaryName(image string) string {
	ref := image
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		ref = ref[i+1:]
	}
	// Only the last element is left, so a colon is a tag (a registry port sits in the first one).
	if i := strings.IndexByte(ref, ':'); i >= 0 {
		ref = ref[:i]
	}
	return ref
}

// ImageTag is the image's tag ("registry.example:5000/d8v/virt-api:0.1.0" -> "0.1.0"), empty when
// it has none or names a digest.
func ImageTag(image string) string {
	if strings.IndexByte(image, '@') >= 0 {
		return ""
	}
	last := image[strings.LastIndexByte(image, '/')+1:]
	if i := strings.IndexByte(last, ':'); i >= 0 {
		return last[i+1:]
	}
	return ""
}

// resolverFS is the file system as the resolver sees it; tests replace it.
type resolverFS struct {
	// executable reports whether path is an executable regular file.
	executable func(path string) bool
	// lookPath finds a program in PATH (exec.LookPath).
	lookPath func(file string) (string, error)
}

func hostFS() resolverFS {
	return resolverFS{
		executable: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
		},
		lookPath: exec.LookPath,
	}
}

// ResolveExecutable finds the program a container runs and returns it with the full argv
// (argv[0] as the container asked for it, as a runtime passes it). The bin directory holds the
// programs of every image; those of one tag may have a directory of their own, <binDir>/<tag>
// (an earlier release's build, which an upgrade test installs), and are taken from there first:
//
//   - with a command, command[0] is <basename of command[0]> in those directories when it is
//     there, otherwise looked up in PATH (or taken as the path it is);
//   - without one, the image's program ImageBinaryName(image) in those directories runs.
//
// args (already expanded) follow the command.
func ResolveExecutable(binDir, image string, command, args []string) (path string, argv []string, err error) {
	return resolveExecutable(hostFS(), binDir, image, command, args)
}

func resolveExecutable(fs resolverFS, binDir, image string, command, args []string) (string, []string, error) {
	// inBinDir is the program name in the tag's directory or the bin directory, if it is there.
	inBinDir := func(name string) (string, bool) {
		if binDir == "" {
			return "", false
		}
		if tag := ImageTag(image); tag != "" && tag != "." && tag != ".." {
			if p := filepath.Join(binDir, tag, name); fs.executable(p) {
				return p, true
			}
		}
		p := filepath.Join(binDir, name)
		return p, fs.executable(p)
	}
	if len(command) > 0 && command[0] != "" {
		argv := append(append([]string{}, command...), args...)
		if p, ok := inBinDir(filepath.Base(command[0])); ok {
			return p, argv, nil
		}
		p, err := fs.lookPath(command[0])
		if err != nil {
			return "", nil, fmt.Errorf("command %q: not in %s and not found in PATH: %w", command[0], binDir, err)
		}
		if !filepath.IsAbs(p) {
			if p, err = filepath.Abs(p); err != nil {
				return "", nil, err
			}
		}
		return p, argv, nil
	}
	name := ImageBinaryName(image)
	if name == "" {
		return "", nil, fmt.Errorf("container has neither a command nor an image")
	}
	if binDir == "" {
		return "", nil, fmt.Errorf("image %q: no --bin-dir to find %s in", image, name)
	}
	p, ok := inBinDir(name)
	if !ok {
		return "", nil, fmt.Errorf("image %q: program %s does not exist (run make build)", image, p)
	}
	return p, append([]string{p}, args...), nil
}

// ImagePath is where a containerDisk image's disk lives in an image store: the reference,
// path-escaped into one directory name, holds disk.qcow2 (the scheme virt-launcher reads).
func ImagePath(store, image string) string {
	return filepath.Join(store, url.PathEscape(image), "disk.qcow2")
}

// ImportImage copies a qcow2 file into the image store as the disk of image, readable by every
// user (QEMU may run as an unprivileged user). The copy replaces an earlier one atomically.
func ImportImage(store, image, disk string) (string, error) {
	if image == "" || disk == "" {
		return "", errors.New("image reference and disk file are required")
	}
	src, err := os.Open(disk)
	if err != nil {
		return "", err
	}
	defer src.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(src, magic); err != nil || string(magic) != "QFI\xfb" {
		return "", fmt.Errorf("%s is not a qcow2 image", disk)
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	dst := ImagePath(store, image)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	for _, d := range []string{store, filepath.Dir(dst)} {
		if err := os.Chmod(d, 0o755); err != nil {
			return "", err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".import-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", fmt.Errorf("copy %s: %w", disk, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}

// PublishImage is ImportImage for a pulled image: the store records the manifest digest its copy
// came from, and an image already published from that digest is not copied again (a batch of
// launcher Pods of one image publishes it once). A lock beside the disk, shared by the node
// agents on the machine, keeps two publishers of one image from copying at once.
func PublishImage(store, image, digest, disk string) error {
	dir := filepath.Dir(ImagePath(store, image))
	unlock, err := filelock.Lock(filepath.Join(dir, ".lock"))
	if err != nil {
		return fmt.Errorf("publish %s: %w", image, err)
	}
	defer unlock()
	recorded := filepath.Join(dir, "digest")
	if b, err := os.ReadFile(recorded); err == nil && string(b) == digest {
		if _, err := os.Stat(ImagePath(store, image)); err == nil {
			return nil
		}
	}
	if _, err := ImportImage(store, image, disk); err != nil {
		return err
	}
	return os.WriteFile(recorded, []byte(digest), 0o644)
}
