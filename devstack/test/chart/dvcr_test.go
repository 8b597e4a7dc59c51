package chart

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/d8virt/devstack/dvcr"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/htpasswd"
)

// DVCR: one pod with a push and a read-only pull instance of the registry, each taking only its
// own user's generated credentials, on the storage the values choose.
func TestDVCR(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		image   string
		storage func(t *testing.T, v corev1.Volume, objs []*unstructured.Unstructured)
	}{
		{name: "default: a claim of the default class", image: "registry.example.com/d8virt/dvcr:0.2.0", storage: func(t *testing.T, v corev1.Volume, objs []*unstructured.Unstructured) {
			claim := claimOf(t, v, objs)
			if claim.Spec.StorageClassName != nil || claim.Spec.Resources.Requests.Storage().String() != "50Gi" {
				t.Errorf("claim %+v", claim.Spec)
			}
			if claim.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("the claim of the images is not kept on uninstall")
			}
		}},
		{name: "custom: a claim of a named class", args: []string{"-f", testdata(t, "values-custom.yaml")}, image: "mirror.example.org/virt/dvcr:v0.2.0", storage: func(t *testing.T, v corev1.Volume, objs []*unstructured.Unstructured) {
			claim := claimOf(t, v, objs)
			if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != "fast-ssd" || claim.Spec.Resources.Requests.Storage().String() != "100Gi" {
				t.Errorf("claim %+v", claim.Spec)
			}
		}},
		{name: "hostPath", args: []string{"--set", "dvcr.storage.type=HostPath,dvcr.storage.hostPath.path=/srv/images"}, image: "registry.example.com/d8virt/dvcr:0.2.0", storage: func(t *testing.T, v corev1.Volume, objs []*unstructured.Unstructured) {
			if v.HostPath == nil || v.HostPath.Path != "/srv/images" || objsOf(objs, "PersistentVolumeClaim") != nil {
				t.Errorf("storage %+v", v.VolumeSource)
			}
		}},
		{name: "emptyDir", args: []string{"--set", "dvcr.storage.type=EmptyDir,dvcr.storage.emptyDir.sizeLimit=5Gi"}, image: "registry.example.com/d8virt/dvcr:0.2.0", storage: func(t *testing.T, v corev1.Volume, objs []*unstructured.Unstructured) {
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit.String() != "5Gi" || objsOf(objs, "PersistentVolumeClaim") != nil {
				t.Errorf("storage %+v", v.VolumeSource)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decode(t, render(t, append(tc.args, monitoringAPIs...)...))
			dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", "dvcr"))
			spec := dep.Spec.Template.Spec
			if spec.ServiceAccountName != "dvcr" || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || *dep.Spec.Replicas != 1 {
				t.Errorf("account %q, strategy %q, replicas %d", spec.ServiceAccountName, dep.Spec.Strategy.Type, *dep.Spec.Replicas)
			}
			if spec.PriorityClassName == "" {
				t.Errorf("no priority class")
			}
			config := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "dvcr-config"))
			for _, inst := range []struct {
				container, config, user string
				readonly                bool
			}{{"registry", "push.yaml", "dvcr-pusher", false}, {"registry-pull", "pull.yaml", "dvcr-puller", true}} {
				c := container(t, spec, inst.container)
				if c.Image != tc.image || !slices.Equal(c.Command, []string{dvcr.Binary, "serve", "/etc/dvcr/config/" + inst.config}) {
					t.Errorf("%s: image %s, command %v", inst.container, c.Image, c.Command)
				}
				var cfg struct {
					Storage struct {
						Maintenance struct {
							ReadOnly struct{ Enabled bool } `json:"readonly"`
						}
					}
					HTTP struct {
						TLS struct{ Certificate string }
					}
					Auth struct{ Htpasswd struct{ Path string } }
				}
				if err := yaml.Unmarshal([]byte(config.Data[inst.config]), &cfg); err != nil {
					t.Fatalf("%s: %v", inst.config, err)
				}
				if cfg.Storage.Maintenance.ReadOnly.Enabled != inst.readonly || cfg.HTTP.TLS.Certificate == "" || cfg.Auth.Htpasswd.Path != "/etc/dvcr/htpasswd/htpasswd" {
					t.Errorf("%s: %+v", inst.config, cfg)
				}
				// The instance mounts exactly its user's htpasswd (written by the htpasswd init
				// container); the pull instance reads the storage only.
				for _, m := range c.VolumeMounts {
					if m.MountPath == "/etc/dvcr/htpasswd" && m.Name != inst.user+"-htpasswd" {
						t.Errorf("%s mounts the htpasswd of %s", inst.container, m.Name)
					}
					if m.Name == "storage" && m.ReadOnly != inst.readonly {
						t.Errorf("%s mounts the storage readOnly=%v", inst.container, m.ReadOnly)
					}
				}
			}
			// The htpasswd files are written from the users' .dockerconfigjson (dvcr-htpasswd,
			// pkg/htpasswd), and the garbage collection runs before the registries, over the push
			// instance's configuration and the storage, writable: the command devstack/dvcr runs.
			if len(spec.InitContainers) != 2 {
				t.Fatalf("init containers %+v", spec.InitContainers)
			}
			hp := spec.InitContainers[0]
			want := []string{"dvcr-htpasswd", "/etc/dvcr/users/dvcr-pusher/.dockerconfigjson", "/run/dvcr/dvcr-pusher/htpasswd",
				"/etc/dvcr/users/dvcr-puller/.dockerconfigjson", "/run/dvcr/dvcr-puller/htpasswd"}
			if hp.Name != "htpasswd" || hp.Image != tc.image || !slices.Equal(hp.Command, want) {
				t.Errorf("init container %s: image %s, command %v, want %v", hp.Name, hp.Image, hp.Command, want)
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v
			}
			for _, user := range []string{"dvcr-pusher", "dvcr-puller"} {
				if v := volumes[user]; v.Secret == nil || v.Secret.SecretName != user || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != corev1.DockerConfigJsonKey {
					t.Errorf("volume %s %+v: only the user's .dockerconfigjson", user, v.VolumeSource)
				}
				if v := volumes[user+"-htpasswd"]; v.EmptyDir == nil {
					t.Errorf("volume %s-htpasswd %+v: an emptyDir", user, v.VolumeSource)
				}
				ok := 0
				for _, m := range hp.VolumeMounts {
					if (m.Name == user && m.MountPath == "/etc/dvcr/users/"+user) || (m.Name == user+"-htpasswd" && m.MountPath == "/run/dvcr/"+user && !m.ReadOnly) {
						ok++
					}
				}
				if ok != 2 {
					t.Errorf("the htpasswd init container's mounts of %s: %+v", user, hp.VolumeMounts)
				}
			}
			gc := spec.InitContainers[1]
			if want := []string{"sh", "-c", dvcr.GarbageCollectScript("/var/lib/registry", "/etc/dvcr/config/push.yaml")}; gc.Name != "gc" || gc.Image != tc.image || !slices.Equal(gc.Command, want) {
				t.Errorf("init container %s: image %s, command %v, want %v", gc.Name, gc.Image, gc.Command, want)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range gc.VolumeMounts {
				mounts[m.Name] = m
			}
			if m := mounts["storage"]; m.MountPath != "/var/lib/registry" || m.ReadOnly {
				t.Errorf("gc mounts the storage %+v", m)
			}
			if m := mounts["config"]; m.MountPath != "/etc/dvcr/config" {
				t.Errorf("gc mounts the configuration %+v", m)
			}
			controller := into[appsv1.Deployment](t, find(t, objs, "Deployment", "virtualization-controller")).Spec.Template.Spec
			if args := container(t, controller, "virtualization-controller").Args; !slices.Contains(args, "--dvcr-gc-schedule=0 2 * * *") || !slices.Contains(args, "--dvcr-deployment=dvcr") {
				t.Errorf("virtualization-controller's args %q: no daily collection of DVCR", args)
			}
			for _, v := range spec.Volumes {
				if v.Name == "storage" {
					tc.storage(t, v, objs)
				}
			}
			for _, user := range []struct{ secret, name, host string }{
				{"dvcr-pusher", "pusher", "dvcr." + namespace + ".svc:5000"},
				{"dvcr-puller", "puller", "dvcr." + namespace + ".svc"},
			} {
				checkCredentials(t, into[corev1.Secret](t, find(t, objs, "Secret", user.secret)), user.name, user.host)
			}
			find(t, objs, "Secret", "dvcr-tls")
			find(t, objs, "PodDisruptionBudget", "dvcr")
			sm := find(t, objs, "ServiceMonitor", "dvcr")
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(eps) != 2 {
				t.Errorf("ServiceMonitor dvcr endpoints %v", eps)
			}
		})
	}
}

func claimOf(t *testing.T, v corev1.Volume, objs []*unstructured.Unstructured) *corev1.PersistentVolumeClaim {
	t.Helper()
	if v.PersistentVolumeClaim == nil {
		t.Fatalf("storage %+v is no claim", v.VolumeSource)
	}
	return into[corev1.PersistentVolumeClaim](t, find(t, objs, "PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName))
}

// checkCredentials: a .dockerconfigjson for host, and nothing else, whose password the htpasswd
// file DVCR's pod writes from it (pkg/htpasswd) accepts.
func checkCredentials(t *testing.T, s *corev1.Secret, user, host string) {
	t.Helper()
	if s.Type != corev1.SecretTypeDockerConfigJson {
		t.Errorf("%s: type %s", s.Name, s.Type)
	}
	var config struct {
		Auths map[string]struct{ Username, Password, Auth string }
	}
	if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &config); err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	a, ok := config.Auths[host]
	if !ok || a.Username != user || len(a.Password) < 32 || a.Auth != base64.StdEncoding.EncodeToString([]byte(user+":"+a.Password)) {
		t.Fatalf("%s: auths %+v, want %s for %s", s.Name, config.Auths, user, host)
	}
	if len(s.Data) != 1 {
		t.Errorf("%s: keys %v, want only %s", s.Name, slices.Collect(maps.Keys(s.Data)), corev1.DockerConfigJsonKey)
	}
	file, err := htpasswd.FromDockerConfig(s.Data[corev1.DockerConfigJsonKey])
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	name, hash, _ := strings.Cut(strings.TrimSpace(string(file)), ":")
	if name != user || bcrypt.CompareHashAndPassword([]byte(hash), []byte(a.Password)) != nil {
		t.Errorf("%s: htpasswd %q does not accept the password of .dockerconfigjson", s.Name, file)
	}
}

// DVCR's credentials stay as they are across upgrades: the render reads the Secrets back.
func TestDVCRCredentialsKeptAcrossUpgrades(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	installCRDs(t, env)
	ns := env.Namespace(t)
	ctx := testenv.Context(t)
	renderSecrets := func() map[string]*corev1.Secret {
		t.Helper()
		out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--dry-run=server", "--kubeconfig", env.Kubeconfig)
		if err != nil {
			t.Fatalf("helm install --dry-run=server: %v\n%s", err, out)
		}
		secrets := map[string]*corev1.Secret{}
		for _, o := range decode(t, manifestOf(out)) {
			if o.GetKind() == "Secret" {
				secrets[o.GetName()] = into[corev1.Secret](t, o)
			}
		}
		return secrets
	}
	first := renderSecrets()
	second := renderSecrets()
	if bytes.Equal(first["dvcr-pusher"].Data[".dockerconfigjson"], second["dvcr-pusher"].Data[".dockerconfigjson"]) {
		t.Fatal("two fresh installs rendered the same pusher password")
	}
	// As the first install left them.
	for _, name := range []string{"dvcr-pusher", "dvcr-puller"} {
		s := first[name]
		s.Namespace = ns
		s.Labels["app.kubernetes.io/managed-by"] = "Helm"
		s.Annotations = map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	again := renderSecrets()
	for _, name := range []string{"dvcr-pusher", "dvcr-puller"} {
		for _, key := range []string{".dockerconfigjson"} {
			if !bytes.Equal(again[name].Data[key], first[name].Data[key]) {
				t.Errorf("%s %s changed on upgrade", name, key)
			}
		}
	}
}
