package nodeagent

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B": "beta", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"x-$(A)-$(B)-y", "x-alpha-beta-y"},
		{"$(EMPTY)", ""},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$alpha"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$A", "$A"},
		{"$()", "$()"},
		{"$(A", "$(A"},
		{"$(A $$", "$(A $"},
		{"$(A)$(B", "alpha$(B"},
		{"100%$(A)", "100%alpha"},
	} {
		if got := Expand(tc.in, lookup); got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$$", "$(", "x$(B)y$", "$()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		none := func(string) (string, bool) { return "", false }
		// Without variables only escapes change: $$ becomes $, nothing else.
		got := Expand(s, none)
		if len(got) > len(s) {
			t.Fatalf("Expand(%q) = %q grew without variables", s, got)
		}
		if !strings.Contains(s, "$$") && got != s {
			t.Fatalf("Expand(%q) = %q changed a string without escapes or known variables", s, got)
		}
	})
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "apps", UID: "1234-5678",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": `say "hi"`},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1", ServiceAccountName: "robot",
			Containers: []corev1.Container{{
				Name: "main",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
			}, {Name: "side"}},
		},
	}
}

func testSource() EnvSource {
	cms := map[string]*corev1.ConfigMap{
		"settings": {Data: map[string]string{"mode": "fast", "level": "3"}, BinaryData: map[string][]byte{"blob": []byte("bin")}},
	}
	secrets := map[string]*corev1.Secret{
		"creds": {Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cret")}},
	}
	return EnvSource{
		Pod: testPod(), PodIP: "10.213.0.7", HostIP: "10.213.0.1",
		NodeAllocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		APIHost:         "10.213.0.1", APIPort: "8043",
		ConfigMap: func(ns, name string) (*corev1.ConfigMap, error) {
			if cm, ok := cms[name]; ok && ns == "apps" {
				return cm, nil
			}
			return nil, errors.New("not found")
		},
		Secret: func(ns, name string) (*corev1.Secret, error) {
			if s, ok := secrets[name]; ok && ns == "apps" {
				return s, nil
			}
			return nil, errors.New("not found")
		},
	}
}

func TestFieldValue(t *testing.T) {
	src := testSource()
	for _, tc := range []struct{ path, want string }{
		{"metadata.name", "web-0"},
		{"metadata.namespace", "apps"},
		{"metadata.uid", "1234-5678"},
		{"metadata.labels['app']", "web"},
		{"metadata.labels['missing']", ""},
		{"metadata.annotations['note']", `say "hi"`},
		{"metadata.labels", "app=\"web\"\ntier=\"front\""},
		{"metadata.annotations", `note="say \"hi\""`},
		{"spec.nodeName", "n1"},
		{"spec.serviceAccountName", "robot"},
		{"status.podIP", "10.213.0.7"},
		{"status.podIPs", "10.213.0.7"},
		{"status.hostIP", "10.213.0.1"},
	} {
		got, err := FieldValue(src, tc.path)
		if err != nil || got != tc.want {
			t.Errorf("FieldValue(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	if _, err := FieldValue(src, "spec.bogus"); err == nil {
		t.Error("unknown field path accepted")
	}
}

func TestResourceFieldValue(t *testing.T) {
	src := testSource()
	main := &src.Pod.Spec.Containers[0]
	for _, tc := range []struct {
		name      string
		container string
		resource  string
		divisor   string
		want      string
	}{
		{"cpu request in millicores", "", "requests.cpu", "1m", "250"},
		{"cpu request rounds up to cores", "", "requests.cpu", "", "1"},
		{"unset cpu limit is node allocatable", "", "limits.cpu", "", "2"},
		{"memory limit in Mi", "", "limits.memory", "1Mi", "128"},
		{"memory request in bytes", "", "requests.memory", "", "67108864"},
		{"other container's unset limit", "side", "limits.memory", "1Gi", "8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := &corev1.ResourceFieldSelector{ContainerName: tc.container, Resource: tc.resource}
			if tc.divisor != "" {
				ref.Divisor = resource.MustParse(tc.divisor)
			}
			got, err := ResourceFieldValue(src, main, ref)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestContainerEnv(t *testing.T) {
	yes := true
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	for _, tc := range []struct {
		name    string
		from    []corev1.EnvFromSource
		env     []corev1.EnvVar
		want    []string
		wantErr string
	}{
		{
			name: "downward API, references and the apiserver",
			env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: field("metadata.name")},
				{Name: "POD_IP", ValueFrom: field("status.podIP")},
				{Name: "NODE", ValueFrom: field("spec.nodeName")},
				{Name: "URL", Value: "http://$(POD_IP):8080/$(POD_NAME)/$(NOPE)"},
				{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
			},
			want: []string{
				"KUBERNETES_SERVICE_HOST=10.213.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=8043",
				"KUBERNETES_PORT=tcp://10.213.0.1:8043",
				"POD_NAME=web-0", "POD_IP=10.213.0.7", "NODE=n1", "URL=http://10.213.0.7:8080/web-0/$(NOPE)",
			},
		},
		{
			name: "envFrom with prefix, then env overrides",
			from: []corev1.EnvFromSource{
				{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &yes}},
			},
			env: []corev1.EnvVar{{Name: "user", Value: "$(user)-override"}},
			want: []string{
				"KUBERNETES_SERVICE_HOST=10.213.0.1", "KUBERNETES_SERVICE_PORT=8043", "KUBERNETES_SERVICE_PORT_HTTPS=8043",
				"KUBERNETES_PORT=tcp://10.213.0.1:8043",
				"CFG_level=3", "CFG_mode=fast", "pass=s3cret", "user=admin-override",
			},
		},
		{
			name: "key refs, optional and binary",
			env: []corev1.EnvVar{
				{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}},
				{Name: "BLOB", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "blob"}}},
				{Name: "PASS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "pass"}}},
				{Name: "GONE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "nope", Optional: &yes}}},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			},
			want: []string{
				"KUBERNETES_SERVICE_HOST=10.213.0.1", "KUBERNETES_SERVICE_PORT=8043", "KUBERNETES_SERVICE_PORT_HTTPS=8043",
				"KUBERNETES_PORT=tcp://10.213.0.1:8043",
				"MODE=fast", "BLOB=bin", "PASS=s3cret", "MEM=128",
			},
		},
		{
			name:    "missing required key",
			env:     []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "nope"}}}},
			wantErr: `configMap "settings" has no key "nope"`,
		},
		{
			name:    "missing required configMap",
			from:    []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}},
			wantErr: `envFrom configMap "absent"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := testSource()
			c := &src.Pod.Spec.Containers[0]
			c.EnvFrom, c.Env = tc.from, tc.env
			got, err := ContainerEnv(src, c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every container starts from an image-like PATH and HOME.
			want := append([]string{"PATH=" + DefaultPath, "HOME=/root"}, tc.want...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("env\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestExpandArgs(t *testing.T) {
	env := []string{"NAME=vm1", "DIR=/var/run/kubevirt", "EQ=a=b"}
	for _, tc := range []struct{ in, want []string }{
		{[]string{"virt-launcher", "--name", "$(NAME)"}, []string{"virt-launcher", "--name", "vm1"}},
		{[]string{"--socket=$(DIR)/sockets/$(NAME).sock"}, []string{"--socket=/var/run/kubevirt/sockets/vm1.sock"}},
		{[]string{"$(EQ)", "$$(NAME)", "$(MISSING)"}, []string{"a=b", "$(NAME)", "$(MISSING)"}},
		{nil, []string{}},
	} {
		if got := ExpandArgs(env, tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExpandArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
