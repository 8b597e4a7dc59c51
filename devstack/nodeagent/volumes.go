package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ServiceAccountMountPath is where automountServiceAccountToken puts the token, ca.crt and namespace.
const ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// automountVolume names the projected volume the agent adds itself when a pod wants its
// service-account token but the apiserver's ServiceAccount admission did not inject one.
const automountVolume = "kube-api-access-d8v"

const defaultFileMode = 0o644

// VolumeSource is what volume preparation reads from the cluster.
type VolumeSource struct {
	Env EnvSource
	// Token issues a service-account token bound to the pod (TokenRequest API); an empty audience
	// means the apiserver's default.
	Token func(ctx context.Context, serviceAccount, audience string, expirationSeconds int64) (Token, error)
	// CACert is the cluster CA, for the ca.crt of the automount volume.
	CACert []byte
	// ClaimPath finds the host directory (or block device) of a bound PersistentVolumeClaim
	// (hostPath or local PVs).
	ClaimPath func(ctx context.Context, namespace, claim string) (string, error)
}

// localVolumePath is the host path of a local PV with its symlinks resolved (the local
// provisioner's Block volumes are a symlink to their loop device, whose number may change across
// restarts), checked against the PV's volume mode: a directory for Filesystem, a block device
// for Block.
func localVolumePath(pv *corev1.PersistentVolume) (string, error) {
	p, err := filepath.EvalSymlinks(pv.Spec.Local.Path)
	if err != nil {
		return "", fmt.Errorf("persistentVolume %q: %w", pv.Name, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("persistentVolume %q: %w", pv.Name, err)
	}
	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock
	switch m := st.Mode(); {
	case block && (m&fs.ModeDevice == 0 || m&fs.ModeCharDevice != 0):
		return "", fmt.Errorf("persistentVolume %q: volumeMode Block but %s is not a block device", pv.Name, p)
	case !block && !m.IsDir():
		return "", fmt.Errorf("persistentVolume %q: volumeMode Filesystem but %s is not a directory", pv.Name, p)
	}
	return p, nil
}

// Token is a service-account token with its lifetime.
type Token struct {
	Value           string
	Issued, Expires time.Time
}

// RefreshAt is when a token is renewed: at 80% of its lifetime, as kubelet renews.
func (t Token) RefreshAt() time.Time { return t.Issued.Add(t.Expires.Sub(t.Issued) * 8 / 10) }

// volumeFile is one file of a configMap, secret, downwardAPI or projected volume.
type volumeFile struct {
	data []byte
	mode fs.FileMode
}

// EffectiveVolumes are the pod's volumes plus, when the pod wants its service-account token and
// some container lacks a mount at ServiceAccountMountPath, the agent's own projected volume
// holding it. mounts returns a container's volume mounts with that volume added where missing.
func EffectiveVolumes(pod *corev1.Pod, automount bool) (vols []corev1.Volume, mounts func(c *corev1.Container) []corev1.VolumeMount) {
	vols = append([]corev1.Volume{}, pod.Spec.Volumes...)
	lacks := func(c *corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			if filepath.Clean(m.MountPath) == ServiceAccountMountPath {
				return false
			}
		}
		return true
	}
	need := false
	if automount {
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				need = need || lacks(&cs[i])
			}
		}
	}
	if !need {
		return vols, func(c *corev1.Container) []corev1.VolumeMount { return c.VolumeMounts }
	}
	expiry := int64(3607)
	vols = append(vols, corev1.Volume{Name: automountVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	return vols, func(c *corev1.Container) []corev1.VolumeMount {
		ms := append([]corev1.VolumeMount{}, c.VolumeMounts...)
		if lacks(c) {
			ms = append(ms, corev1.VolumeMount{Name: automountVolume, MountPath: ServiceAccountMountPath, ReadOnly: true})
		}
		return ms
	}
}

// VolumeHostPath is where a volume's contents are on this machine. Volumes the agent fills live
// under the pod directory exactly where kubelet keeps them; hostPath volumes are the host path
// itself, except under the kubelet's own directory (KubeletDir): that is this agent's root, so that
// node agents side by side each show their own pods to a DaemonSet (virt-handler) that mounts
// /var/lib/kubelet/pods, as a kubelet would. PersistentVolumeClaims are resolved by PrepareVolumes.
func VolumeHostPath(l Layout, pod *corev1.Pod, v *corev1.Volume) (string, error) {
	switch {
	case v.EmptyDir != nil:
		return l.EmptyDirPath(pod.UID, v.Name), nil
	case v.ConfigMap != nil:
		return l.VolumePath(pod.UID, PluginConfigMap, v.Name), nil
	case v.Secret != nil:
		return l.VolumePath(pod.UID, PluginSecret, v.Name), nil
	case v.Projected != nil:
		return l.VolumePath(pod.UID, PluginProjected, v.Name), nil
	case v.DownwardAPI != nil:
		return l.VolumePath(pod.UID, PluginDownwardAPI, v.Name), nil
	case v.HostPath != nil:
		return l.HostPath(v.HostPath.Path), nil
	}
	return "", fmt.Errorf("volume %q: unsupported volume type (the node agent handles emptyDir, configMap, secret, projected, downwardAPI, hostPath and hostPath-backed PVCs)", v.Name)
}

// PrepareVolumes creates or refreshes every volume and returns the host path of each, by name, and
// the time by which its service-account tokens should be renewed (zero without tokens).
func PrepareVolumes(ctx context.Context, l Layout, pod *corev1.Pod, vols []corev1.Volume, src VolumeSource) (map[string]string, time.Time, error) {
	paths := map[string]string{}
	var refresh time.Time
	for i := range vols {
		v := &vols[i]
		if v.PersistentVolumeClaim != nil {
			if src.ClaimPath == nil {
				return nil, time.Time{}, fmt.Errorf("volume %q: persistentVolumeClaim unsupported", v.Name)
			}
			p, err := src.ClaimPath(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			paths[v.Name] = p
			continue
		}
		p, err := VolumeHostPath(l, pod, v)
		if err != nil {
			return nil, time.Time{}, err
		}
		paths[v.Name] = p
		var files map[string]volumeFile
		switch {
		case v.EmptyDir != nil:
			if err := os.MkdirAll(p, 0o777); err != nil {
				return nil, time.Time{}, err
			}
			if err := os.Chmod(p, 0o777); err != nil {
				return nil, time.Time{}, err
			}
			continue
		case v.HostPath != nil:
			if err := checkHostPath(p, v.HostPath.Type); err != nil {
				return nil, time.Time{}, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			continue
		case v.ConfigMap != nil:
			files, err = sourceFiles(src.Env, kindConfigMap, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode))
		case v.Secret != nil:
			files, err = sourceFiles(src.Env, kindSecret, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode))
		case v.DownwardAPI != nil:
			files, err = downwardAPIFiles(src.Env, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
		case v.Projected != nil:
			var r time.Time
			files, r, err = projectedFiles(ctx, src, v.Projected)
			if !r.IsZero() && (refresh.IsZero() || r.Before(refresh)) {
				refresh = r
			}
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if err := writeFiles(p, files); err != nil {
			return nil, time.Time{}, fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return paths, refresh, nil
}

func mode(m *int32) fs.FileMode {
	if m == nil {
		return defaultFileMode
	}
	return fs.FileMode(*m) & fs.ModePerm
}

func checkHostPath(p string, t *corev1.HostPathType) error {
	ht := corev1.HostPathUnset
	if t != nil {
		ht = *t
	}
	st, err := os.Stat(p)
	switch ht {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if err != nil {
			return os.MkdirAll(p, 0o755)
		}
		if !st.IsDir() {
			return fmt.Errorf("hostPath %s is not a directory", p)
		}
		return nil
	case corev1.HostPathFileOrCreate:
		if err != nil {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if st.IsDir() {
			return fmt.Errorf("hostPath %s is a directory, not a file", p)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("hostPath %s: %w", p, err)
	}
	m := st.Mode()
	ok := map[corev1.HostPathType]bool{
		corev1.HostPathDirectory: m.IsDir(),
		corev1.HostPathFile:      m.IsRegular(),
		corev1.HostPathSocket:    m&fs.ModeSocket != 0,
		corev1.HostPathCharDev:   m&fs.ModeCharDevice != 0,
		corev1.HostPathBlockDev:  m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0,
	}[ht]
	if !ok {
		return fmt.Errorf("hostPath %s is not of type %s", p, ht)
	}
	return nil
}

// keyFiles maps a configMap's or secret's data through items (all keys when items is empty).
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, optional bool, def fs.FileMode) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = volumeFile{data: v, mode: def}
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("key %q does not exist", it.Key)
		}
		m := def
		if it.Mode != nil {
			m = mode(it.Mode)
		}
		files[it.Path] = volumeFile{data: v, mode: m}
	}
	return files, nil
}

// sourceFiles are the files of a configMap or secret volume (or projection), by kind.
func sourceFiles(src EnvSource, kind, name string, items []corev1.KeyToPath, optional *bool, def fs.FileMode) (map[string]volumeFile, error) {
	data, err := src.keyData(kind, src.Pod.Namespace, name)
	if err != nil {
		if isOptional(optional) {
			return map[string]volumeFile{}, nil
		}
		return nil, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	files, err := keyFiles(data, items, isOptional(optional), def)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	return files, nil
}

func downwardAPIFiles(src EnvSource, items []corev1.DownwardAPIVolumeFile, def fs.FileMode) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = FieldValue(src, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = ResourceFieldValue(src, nil, it.ResourceFieldRef)
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef")
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI %s: %w", it.Path, err)
		}
		m := def
		if it.Mode != nil {
			m = mode(it.Mode)
		}
		files[it.Path] = volumeFile{data: []byte(v), mode: m}
	}
	return files, nil
}

// projectedFiles gathers every source of a projected volume; refresh is when its token (if any)
// is due for renewal.
func projectedFiles(ctx context.Context, src VolumeSource, p *corev1.ProjectedVolumeSource) (map[string]volumeFile, time.Time, error) {
	def := mode(p.DefaultMode)
	files := map[string]volumeFile{}
	var refresh time.Time
	add := func(fs map[string]volumeFile, err error) error {
		if err != nil {
			return err
		}
		for k, v := range fs {
			files[k] = v
		}
		return nil
	}
	for _, s := range p.Sources {
		var err error
		switch {
		case s.ConfigMap != nil:
			err = add(sourceFiles(src.Env, kindConfigMap, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, def))
		case s.Secret != nil:
			err = add(sourceFiles(src.Env, kindSecret, s.Secret.Name, s.Secret.Items, s.Secret.Optional, def))
		case s.DownwardAPI != nil:
			err = add(downwardAPIFiles(src.Env, s.DownwardAPI.Items, def))
		case s.ServiceAccountToken != nil:
			t := s.ServiceAccountToken
			exp := int64(3600)
			if t.ExpirationSeconds != nil {
				exp = *t.ExpirationSeconds
			}
			if src.Token == nil {
				return nil, time.Time{}, errors.New("serviceAccountToken: no token source")
			}
			tok, terr := src.Token(ctx, src.Env.Pod.Spec.ServiceAccountName, t.Audience, exp)
			if terr != nil {
				return nil, time.Time{}, fmt.Errorf("service account token: %w", terr)
			}
			if r := tok.RefreshAt(); refresh.IsZero() || r.Before(refresh) {
				refresh = r
			}
			files[t.Path] = volumeFile{data: []byte(tok.Value), mode: def}
		default:
			err = errors.New("unsupported projected volume source")
		}
		if err != nil {
			return nil, time.Time{}, err
		}
	}
	return files, refresh, nil
}

// writeFiles makes dir hold exactly files: changed files are replaced by rename, so a reader never
// sees a partial file, and files that are no longer wanted are removed.
func writeFiles(dir string, files map[string]volumeFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	keep := map[string]bool{}
	for rel := range files {
		names = append(names, rel)
		keep[filepath.Clean(rel)] = true
	}
	sort.Strings(names)
	for _, rel := range names {
		f := files[rel]
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("file path %q leaves the volume", rel)
		}
		p := filepath.Join(dir, clean)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.data) {
			if st, err := os.Stat(p); err == nil && st.Mode().Perm() == f.mode {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(p, f.data, f.mode); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !keep[rel] {
			return os.Remove(p)
		}
		return nil
	})
}

// writeFileAtomic writes through a temporary file in the same directory and a rename.
func writeFileAtomic(p string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}
