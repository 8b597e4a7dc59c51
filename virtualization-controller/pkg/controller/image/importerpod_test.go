package image_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/cvi"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
	"github.com/d8virt/virtualization-controller/pkg/controller/vi"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
)

var destination = []string{
	"--destination-ca-bundle=/etc/dvcr/tls/ca.crt",
	"--destination-auth-file=/etc/dvcr/auth/.dockerconfigjson",
	"--scratch-dir=/scratch",
	"--metrics-address=:8080",
}

func TestImporterPod(t *testing.T) {
	cases := []struct {
		name     string
		kind     image.Kind
		img      image.Image
		lookup   image.Lookup
		wantName string
		wantArgs []string // before --destination-image
		wantRepo string
		// wantSecret are the keys of the import's own Secret; nil for none.
		wantSecret []string
	}{
		{"cvi from http", cvi.Kind{}, cviView(func(c *v1alpha2.ClusterVirtualImage) { c.Spec.DataSource.HTTP.Checksum.MD5 = strings.Repeat("b", 32) }), image.Lookup{},
			"cvi-importer-tiny", []string{"--source-url=http://10.0.0.1/tiny.qcow2", "--md5=" + strings.Repeat("b", 32), "--sha256=" + sha}, "cvi/tiny", nil},
		{"vi from https with a caBundle", vi.Kind{}, viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource.HTTP = &v1alpha2.DataSourceHTTP{URL: "https://example/d.img", CABundle: []byte("pem")}
		}), image.Lookup{},
			"vi-importer-ns1-tiny-", []string{"--source-url=https://example/d.img", "--source-ca-bundle=/etc/importer/source/ca.crt"}, "vi/ns1/tiny", []string{"ca.crt"}},
		{"vi from a registry with a pull secret", vi.Kind{}, viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage,
				ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "reg.example/d:1", ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "creds"}, CABundle: []byte("pem")}}
		}), image.Lookup{PullSecretFound: true, PullSecret: []byte(`{"auths":{}}`)},
			"vi-importer-ns1-tiny-", []string{"--source-image=reg.example/d:1", "--source-ca-bundle=/etc/importer/source/ca.crt", "--source-auth-file=/etc/importer/source/.dockerconfigjson"},
			"vi/ns1/tiny", []string{".dockerconfigjson", "ca.crt"}},
		{"cvi from a public registry", cvi.Kind{}, cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage, ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "reg.example/d:1"}}
		}), image.Lookup{}, "cvi-importer-tiny", []string{"--source-image=reg.example/d:1"}, "cvi/tiny", nil},
		{"vi from a cvi in DVCR", vi.Kind{}, viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: "ClusterVirtualImage", Name: "base"}}
		}), image.Lookup{Ref: &image.RefState{Phase: "Ready", Repository: "cvi/base"}},
			"vi-importer-ns1-tiny-", []string{"--source-image=dvcr.d8-virtualization.svc:5000/cvi/base:latest", "--source-ca-bundle=/etc/dvcr/tls/ca.crt", "--source-auth-file=/etc/dvcr/auth/.dockerconfigjson"},
			"vi/ns1/tiny", nil},
		{"vi from an upload", vi.Kind{}, viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}
			v.Annotations = map[string]string{importerpod.AnnotationUploadToken: "t0ken"}
		}), image.Lookup{}, "vi-importer-ns1-tiny-",
			[]string{"--source-upload-address=:8090", "--upload-token-file=/etc/importer/source/upload-token", "--upload-timeout=1h0m0s"}, "vi/ns1/tiny", []string{"upload-token"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secret := testConfig.SourceSecret(tc.kind, tc.img, tc.lookup)
			var keys []string
			if secret != nil {
				for k := range secret.Data {
					keys = append(keys, k)
				}
				slices.Sort(keys)
			}
			if !slices.Equal(keys, tc.wantSecret) {
				t.Fatalf("secret keys %q, want %q", keys, tc.wantSecret)
			}
			p := testConfig.ImporterPod(tc.kind, tc.img, tc.wantRepo, tc.lookup, secret)
			if !strings.HasPrefix(p.Name, tc.wantName) || p.Namespace != "d8-virtualization" || p.Labels[image.LabelImageUID] != "uid-1" || p.Labels[image.LabelImageKind] != tc.kind.Short() ||
				p.Annotations[image.AnnotationImageName] != "tiny" || p.Annotations[image.AnnotationImageNamespace] != tc.img.Object.GetNamespace() {
				t.Fatalf("meta: %+v", p.ObjectMeta)
			}
			// Only a cluster-scoped image can own a Pod of the module's namespace.
			if owned := len(p.OwnerReferences) == 1 && p.OwnerReferences[0].UID == "uid-1" && p.OwnerReferences[0].Kind == tc.kind.Name(); owned == tc.kind.Namespaced() {
				t.Fatalf("owners %+v", p.OwnerReferences)
			}
			c := p.Spec.Containers[0]
			// The controller's log options come first.
			want := slices.Concat([]string{"--log-level=debug", "--log-format=text"}, tc.wantArgs,
				[]string{"--destination-image=dvcr.d8-virtualization.svc:5000/" + tc.wantRepo + ":latest"}, destination)
			if !slices.Equal(c.Args, want) {
				t.Fatalf("args\n got %q\nwant %q", c.Args, want)
			}
			if c.Image != "importer:dev" || p.Spec.RestartPolicy != "Never" || c.TerminationMessagePath != "/dev/termination-log" || *p.Spec.AutomountServiceAccountToken {
				t.Fatalf("container: %+v", c)
			}
			if p.Spec.Volumes[0].Secret.SecretName != "dvcr-tls" || p.Spec.Volumes[1].Secret.SecretName != "dvcr-pusher" {
				t.Fatalf("volumes: %+v", p.Spec.Volumes)
			}
			if secret != nil {
				last := p.Spec.Volumes[len(p.Spec.Volumes)-1]
				if secret.Name != p.Name || secret.Namespace != p.Namespace || last.Secret == nil || last.Secret.SecretName != secret.Name || secret.Type != corev1.SecretTypeOpaque {
					t.Fatalf("secret %s not mounted: %+v", secret.Name, last)
				}
			}
		})
	}
	if got := testConfig.RegistryURL("cvi/tiny"); got != "dvcr.d8-virtualization.svc/cvi/tiny:latest" {
		t.Fatal(got)
	}
}

func TestUploaderService(t *testing.T) {
	img := viView(func(v *v1alpha2.VirtualImage) {
		v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}
	})
	pod := testConfig.ImporterPod(vi.Kind{}, img, "vi/ns1/tiny", image.Lookup{}, nil)
	svc := testConfig.UploaderService(vi.Kind{}, img)
	if msgs := validation.IsDNS1035Label(svc.Name); len(msgs) > 0 || svc.Namespace != "d8-virtualization" {
		t.Fatalf("%s/%s: %v", svc.Namespace, svc.Name, msgs)
	}
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Fatalf("selector %v does not select the pod %v", svc.Spec.Selector, pod.Labels)
		}
	}
	port := svc.Spec.Ports[0]
	if port.Port != 80 || port.TargetPort.StrVal != "upload" || pod.Spec.Containers[0].Ports[1].Name != "upload" || pod.Spec.Containers[0].Ports[1].ContainerPort != 8090 {
		t.Fatalf("ports %+v / %+v", svc.Spec.Ports, pod.Spec.Containers[0].Ports)
	}
	if got := testConfig.UploadURLs(vi.Kind{}, img, svc, &corev1.Pod{}).InCluster; got != "http://"+svc.Name+".d8-virtualization.svc/upload" {
		t.Fatal(got)
	}
	if image.ServiceName("vi", types.NamespacedName{Namespace: "a-b", Name: "c"}) == image.ServiceName("vi", types.NamespacedName{Namespace: "a", Name: "b-c"}) {
		t.Fatal("service names collide")
	}
}

func TestPodName(t *testing.T) {
	long := strings.Repeat("y", 253)
	keys := []types.NamespacedName{{Name: "a"}, {Name: strings.Repeat("x", 240)}, {Name: long}, {Name: long[:252] + "z"},
		{Namespace: "a-b", Name: "c"}, {Namespace: "a", Name: "b-c"}, {Namespace: strings.Repeat("n", 63), Name: long}, {Namespace: strings.Repeat("n", 63), Name: long[:252] + "z"}}
	seen := map[string]types.NamespacedName{}
	for _, key := range keys {
		short := "cvi"
		if key.Namespace != "" {
			short = "vi"
		}
		n := image.PodName(short, key)
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			t.Errorf("%s: %q: %v", key, n, msgs)
		}
		if other, ok := seen[n]; ok {
			t.Errorf("%s and %s share the Pod name %s", key, other, n)
		}
		seen[n] = key
	}
	if got := image.PodName("cvi", types.NamespacedName{Name: "tiny"}); got != "cvi-importer-tiny" {
		t.Error(got)
	}
}
