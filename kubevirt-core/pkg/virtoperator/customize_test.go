package virtoperator

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestCustomizeComponents(t *testing.T) {
	patch := func(typ kubevirtv1.PatchType, kind, name, p string) kubevirtv1.CustomizeComponentsPatch {
		return kubevirtv1.CustomizeComponentsPatch{ResourceType: kind, ResourceName: name, Type: typ, Patch: p}
	}
	for _, tc := range []struct {
		name    string
		patches []kubevirtv1.CustomizeComponentsPatch
		wantErr string
		check   func(t *testing.T, ix index)
	}{
		{name: "strategic merge keeps the other containers and env",
			patches: []kubevirtv1.CustomizeComponentsPatch{patch(kubevirtv1.StrategicMergePatchType, "Deployment", APIName,
				`{"spec":{"template":{"spec":{"containers":[{"name":"virt-api","env":[{"name":"EXTRA","value":"1"}]}]}}}}`)},
			check: func(t *testing.T, ix index) {
				spec := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", APIName).Spec.Template.Spec
				if len(spec.Containers) != 4 || spec.Containers[0].Image == "" {
					t.Fatalf("containers %+v", spec.Containers)
				}
				if env := spec.Containers[0].Env; len(env) == 0 || env[len(env)-1] != (corev1.EnvVar{Name: "EXTRA", Value: "1"}) {
					t.Errorf("virt-api env %+v", env)
				}
			}},
		{name: "JSON patch on every Deployment",
			patches: []kubevirtv1.CustomizeComponentsPatch{patch(kubevirtv1.JSONPatchType, "Deployment", "*",
				`[{"op":"replace","path":"/spec/replicas","value":5}]`)},
			check: func(t *testing.T, ix index) {
				for _, name := range []string{APIName, ControllerName} {
					if r := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", name).Spec.Replicas; *r != 5 {
						t.Errorf("%s replicas %d", name, *r)
					}
				}
			}},
		{name: "merge patch; other kinds and names untouched",
			patches: []kubevirtv1.CustomizeComponentsPatch{
				patch(kubevirtv1.MergePatchType, "DaemonSet", HandlerName, `{"metadata":{"annotations":{"team":"virt"}}}`),
				patch(kubevirtv1.MergePatchType, "Deployment", "no-such-deployment", `{"metadata":{"annotations":{"team":"virt"}}}`),
			},
			check: func(t *testing.T, ix index) {
				if a := get[*appsv1.DaemonSet](t, ix, "DaemonSet", "kv-ns", HandlerName).Annotations["team"]; a != "virt" {
					t.Errorf("handler annotations %q", a)
				}
				if a := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", APIName).Annotations["team"]; a != "" {
					t.Errorf("virt-api got a patch meant for another name")
				}
			}},
		{name: "a JSON patch that does not apply names itself",
			patches: []kubevirtv1.CustomizeComponentsPatch{
				patch(kubevirtv1.MergePatchType, "Service", "*", `{}`),
				patch(kubevirtv1.JSONPatchType, "Deployment", ControllerName, `[{"op":"test","path":"/spec/replicas","value":9}]`),
			},
			wantErr: "spec.customizeComponents.patches[1] (Deployment virt-controller, json)"},
		{name: "an unknown type",
			patches: []kubevirtv1.CustomizeComponentsPatch{patch("yaml", "Deployment", APIName, `{}`)},
			wantErr: `type "yaml" is none of json, merge, strategic`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := customize(Objects(testKV(), testConfig(), testCerts), tc.patches)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != len(Objects(testKV(), testConfig(), testCerts)) {
				t.Fatalf("%d objects", len(objs))
			}
			tc.check(t, indexOf(objs))
		})
	}
}

func TestInstallCarriesPatches(t *testing.T) {
	kv := testKV()
	kv.Spec.CustomizeComponents.Patches = []kubevirtv1.CustomizeComponentsPatch{{ResourceType: "Deployment", ResourceName: "*", Type: kubevirtv1.MergePatchType, Patch: "{}"}}
	if in := NewInstall(kv, testConfig()); len(in.Patches) != 1 {
		t.Errorf("patches %+v", in.Patches)
	}
}
