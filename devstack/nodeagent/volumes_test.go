package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestVolumeLayout(t *testing.T) {
	l := Layout{Root: "/var/lib/d8v/nodes/n1"}
	pod := testPod()
	hp := corev1.HostPathDirectory
	for _, tc := range []struct {
		vol  corev1.Volume
		want string
	}{
		// The contract with virt-handler: emptyDirs are where kubelet keeps them.
		{corev1.Volume{Name: "sockets", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			"/var/lib/d8v/nodes/n1/pods/1234-5678/volumes/kubernetes.io~empty-dir/sockets"},
		{corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			"/var/lib/d8v/nodes/n1/pods/1234-5678/volumes/kubernetes.io~configmap/cfg"},
		{corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
			"/var/lib/d8v/nodes/n1/pods/1234-5678/volumes/kubernetes.io~secret/tls"},
		{corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
			"/var/lib/d8v/nodes/n1/pods/1234-5678/volumes/kubernetes.io~projected/kube-api-access-x"},
		{corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
			"/var/lib/d8v/nodes/n1/pods/1234-5678/volumes/kubernetes.io~downward-api/info"},
		{corev1.Volume{Name: "disks", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/images/", Type: &hp}}},
			"/srv/images"},
	} {
		got, err := VolumeHostPath(l, pod, &tc.vol)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.vol.Name, got, err, tc.want)
		}
	}
	if got := l.EmptyDirPath("u1", "private"); got != "/var/lib/d8v/nodes/n1/pods/u1/volumes/kubernetes.io~empty-dir/private" {
		t.Errorf("EmptyDirPath = %s", got)
	}
	if got := l.LogFile("u1", "compute"); got != "/var/lib/d8v/nodes/n1/pods/u1/logs/compute.log" {
		t.Errorf("LogFile = %s", got)
	}
	if _, err := VolumeHostPath(l, pod, &corev1.Volume{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}}); err == nil {
		t.Error("NFS volume accepted")
	}
}

func TestPrepareVolumes(t *testing.T) {
	root := t.TempDir()
	l := Layout{Root: root}
	src := VolumeSource{Env: testSource()}
	issued := 0
	src.Token = func(_ context.Context, sa, audience string, exp int64) (Token, error) {
		issued++
		now := time.Now()
		return Token{Value: "token-for-" + sa + "-" + audience, Issued: now, Expires: now.Add(time.Duration(exp) * time.Second)}, nil
	}
	pod := src.Env.Pod
	mode := int32(0o600)
	yes := true
	dirType, fileType := corev1.HostPathDirectoryOrCreate, corev1.HostPathFileOrCreate
	hostDir := filepath.Join(root, "host", "made", "for", "me")
	hostFile := filepath.Join(root, "host", "file")
	exp := int64(3600)
	vols := []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
			Items:                []corev1.KeyToPath{{Key: "mode", Path: "conf/mode"}, {Key: "level", Path: "level", Mode: &mode}},
		}}},
		{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &yes}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: &mode}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Items: []corev1.KeyToPath{{Key: "mode", Path: "mode"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
		{Name: "hostdir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: &dirType}}},
		{Name: "hostfile", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostFile, Type: &fileType}}},
	}
	start := time.Now()
	paths, refresh, err := PrepareVolumes(context.Background(), l, pod, vols, src)
	if err != nil {
		t.Fatal(err)
	}
	vol := func(plugin, name string) string { return l.VolumePath(pod.UID, plugin, name) }
	if paths["scratch"] != l.EmptyDirPath(pod.UID, "scratch") || paths["hostdir"] != hostDir {
		t.Errorf("paths %v", paths)
	}
	if st, err := os.Stat(paths["scratch"]); err != nil || st.Mode().Perm() != 0o777 || !st.IsDir() {
		t.Errorf("emptyDir: %v %v", st, err)
	}
	if st, err := os.Stat(hostDir); err != nil || !st.IsDir() {
		t.Errorf("DirectoryOrCreate did not create %s: %v", hostDir, err)
	}
	if st, err := os.Stat(hostFile); err != nil || !st.Mode().IsRegular() {
		t.Errorf("FileOrCreate did not create %s: %v", hostFile, err)
	}
	want := map[string]struct {
		content string
		mode    os.FileMode
	}{
		filepath.Join(vol(PluginConfigMap, "cfg"), "conf/mode"): {"fast", 0o644},
		filepath.Join(vol(PluginConfigMap, "cfg"), "level"):     {"3", 0o600},
		filepath.Join(vol(PluginSecret, "creds"), "user"):       {"admin", 0o600},
		filepath.Join(vol(PluginSecret, "creds"), "pass"):       {"s3cret", 0o600},
		filepath.Join(vol(PluginDownwardAPI, "info"), "labels"): {"app=\"web\"\ntier=\"front\"", 0o644},
		filepath.Join(vol(PluginDownwardAPI, "info"), "name"):   {"web-0", 0o644},
		filepath.Join(vol(PluginProjected, "api"), "token"):     {"token-for-robot-", 0o644},
		filepath.Join(vol(PluginProjected, "api"), "mode"):      {"fast", 0o644},
		filepath.Join(vol(PluginProjected, "api"), "namespace"): {"apps", 0o644},
	}
	for p, w := range want {
		b, err := os.ReadFile(p)
		st, serr := os.Stat(p)
		if err != nil || serr != nil || string(b) != w.content || st.Mode().Perm() != w.mode {
			t.Errorf("%s: %q %v (%v), want %q %v", p, b, st.Mode(), err, w.content, w.mode)
		}
	}
	if entries, err := os.ReadDir(vol(PluginConfigMap, "opt")); err != nil || len(entries) != 0 {
		t.Errorf("optional missing configMap: %v %v", entries, err)
	}
	// The token is renewed at 80% of its life.
	if lo, hi := start.Add(2880*time.Second), time.Now().Add(2880*time.Second); refresh.Before(lo) || refresh.After(hi) {
		t.Errorf("refresh at %v, want 80%% of an hour from now", refresh)
	}

	// A refresh rewrites changed data and drops keys that went away.
	src.Env.ConfigMap = func(ns, name string) (*corev1.ConfigMap, error) {
		return &corev1.ConfigMap{Data: map[string]string{"mode": "slow", "level": "3"}}, nil
	}
	vols[1].ConfigMap.Items = vols[1].ConfigMap.Items[:1]
	if _, _, err := PrepareVolumes(context.Background(), l, pod, vols, src); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(vol(PluginConfigMap, "cfg"), "conf/mode")); string(b) != "slow" {
		t.Errorf("refreshed configMap file holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(vol(PluginConfigMap, "cfg"), "level")); !os.IsNotExist(err) {
		t.Errorf("dropped key still present: %v", err)
	}
	if issued != 2 {
		t.Errorf("%d tokens issued, want 2", issued)
	}

	// Required sources that are missing fail the pod's setup.
	bad := []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}}}}
	if _, _, err := PrepareVolumes(context.Background(), l, pod, bad, src); err == nil || !strings.Contains(err.Error(), `key "nope"`) {
		t.Errorf("missing key: %v", err)
	}
	dirOnly := corev1.HostPathDirectory
	bad = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostFile, Type: &dirOnly}}}}
	if _, _, err := PrepareVolumes(context.Background(), l, pod, bad, src); err == nil {
		t.Error("a file passed as hostPath type Directory")
	}
}

func TestEffectiveVolumes(t *testing.T) {
	withMount := corev1.Container{Name: "a", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abc", MountPath: ServiceAccountMountPath}}}
	without := corev1.Container{Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}
	for _, tc := range []struct {
		name       string
		automount  bool
		containers []corev1.Container
		wantExtra  bool
	}{
		{"admission injected the token", true, []corev1.Container{withMount}, false},
		{"automount off", false, []corev1.Container{without}, false},
		{"agent adds the token", true, []corev1.Container{withMount, without}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: tc.containers, Volumes: []corev1.Volume{{Name: "data"}}}}
			vols, mounts := EffectiveVolumes(pod, tc.automount)
			if got := len(vols) == 2; got != tc.wantExtra {
				t.Fatalf("volumes %v", vols)
			}
			for i := range pod.Spec.Containers {
				ms := mounts(&pod.Spec.Containers[i])
				found := false
				for _, m := range ms {
					found = found || m.MountPath == ServiceAccountMountPath
				}
				if tc.automount && !found {
					t.Errorf("container %s has no token mount: %v", pod.Spec.Containers[i].Name, ms)
				}
			}
			if tc.wantExtra {
				p := vols[1].Projected
				if vols[1].Name != automountVolume || p == nil || p.Sources[0].ServiceAccountToken == nil || p.Sources[1].ConfigMap.Name != "kube-root-ca.crt" ||
					p.Sources[2].DownwardAPI.Items[0].Path != "namespace" {
					t.Errorf("automount volume %+v", vols[1])
				}
			}
			if len(pod.Spec.Containers[0].VolumeMounts) != 1 {
				t.Error("EffectiveVolumes changed the pod")
			}
		})
	}
}

func TestSortMounts(t *testing.T) {
	in := []Mount{
		{Target: "/var/run/kubevirt/sockets"}, {Target: "/tmp"}, {Target: "/var/run/kubevirt"},
		{Target: "/var/run/kubevirt-private"}, {Target: "/dev/termination-log"}, {Target: "/tmp/x/y/z"},
	}
	var got []string
	for _, m := range SortMounts(in) {
		got = append(got, m.Target)
	}
	want := []string{"/tmp", "/dev/termination-log", "/var/run/kubevirt", "/var/run/kubevirt-private", "/var/run/kubevirt/sockets", "/tmp/x/y/z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

func TestParsePrivateDirs(t *testing.T) {
	got, err := ParsePrivateDirs("/run/libvirt, /tmp/,/etc/libvirt:seed")
	if err != nil {
		t.Fatal(err)
	}
	want := []PrivateDir{{Path: "/run/libvirt"}, {Path: "/tmp"}, {Path: "/etc/libvirt", Seed: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	for _, bad := range []string{"relative", "/", "/x:copy"} {
		if _, err := ParsePrivateDirs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestAPIServerAddress(t *testing.T) {
	for _, tc := range []struct{ override, host, wantHost, wantPort string }{
		{"", "https://10.213.0.1:8043", "10.213.0.1", "8043"},
		{"", "https://10.213.0.1", "10.213.0.1", "443"},
		{"10.0.0.5:6443", "https://127.0.0.1:1", "10.0.0.5", "6443"},
	} {
		h, p, err := apiServerAddress(tc.override, tc.host)
		if err != nil || h != tc.wantHost || p != tc.wantPort {
			t.Errorf("%q %q: %s %s %v", tc.override, tc.host, h, p, err)
		}
	}
}

func TestEtcHosts(t *testing.T) {
	pod := testPod()
	pod.Spec.Subdomain = "web"
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.9", Hostnames: []string{"db", "db.local"}}}
	got := etcHosts(pod, "10.213.0.7")
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "10.213.0.7\tweb-0.web.apps.svc.cluster.local\tweb-0\n", "10.0.0.9\tdb\tdb.local\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, got)
		}
	}
}

// A local PV's path is resolved through symlinks (the local provisioner's Block volumes) and must
// suit its volume mode.
func TestLocalVolumePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	block, fsMode := corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem
	type testCase struct {
		name, path string
		mode       *corev1.PersistentVolumeMode
		want       string
		wantErr    string
	}
	tests := []testCase{
		{name: "directory", path: dir, mode: &fsMode, want: dir},
		{name: "default mode is Filesystem", path: dir, want: dir},
		{name: "symlink to a directory", path: link, mode: &fsMode, want: dir},
		{name: "file for Filesystem", path: file, mode: &fsMode, wantErr: "is not a directory"},
		{name: "directory for Block", path: dir, mode: &block, wantErr: "is not a block device"},
		{name: "character device for Block", path: "/dev/null", mode: &block, wantErr: "is not a block device"},
		{name: "missing", path: filepath.Join(dir, "gone"), mode: &fsMode, wantErr: "no such file"},
	}
	if m, _ := filepath.Glob("/dev/loop[0-9]*"); len(m) > 0 {
		devLink := filepath.Join(dir, "device")
		if err := os.Symlink(m[0], devLink); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, testCase{name: "symlink to a block device", path: devLink, mode: &block, want: m[0]})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
				VolumeMode: tt.mode, PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: tt.path}}}}
			got, err := localVolumePath(pv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
