package cvi

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

var testConfig = PodConfig{Namespace: "d8-virtualization", Image: "importer:dev", DVCRAddress: "dvcr.d8-virtualization.svc:5000",
	DVCRPullAddress: "dvcr.d8-virtualization.svc", DVCRPusherSecret: "dvcr-pusher", DVCRTLSSecret: "dvcr-tls"}

func TestImporterPod(t *testing.T) {
	p := testConfig.ImporterPod(image(func(c *v1alpha2.ClusterVirtualImage) { c.Spec.DataSource.HTTP.Checksum.MD5 = strings.Repeat("b", 32) }))
	if p.Name != "cvi-importer-tiny" || p.Namespace != "d8-virtualization" || p.OwnerReferences[0].UID != "uid-1" || p.Labels[LabelCVIUID] != "uid-1" {
		t.Fatalf("meta: %+v", p.ObjectMeta)
	}
	c := p.Spec.Containers[0]
	want := []string{
		"--source-url=http://10.0.0.1/tiny.qcow2",
		"--destination-image=dvcr.d8-virtualization.svc:5000/cvi/tiny:latest",
		"--destination-ca-bundle=/etc/dvcr/tls/ca.crt",
		"--destination-auth-file=/etc/dvcr/auth/.dockerconfigjson",
		"--scratch-dir=/scratch",
		"--metrics-address=:8080",
		"--md5=" + strings.Repeat("b", 32),
		"--sha256=" + strings.Repeat("a", 64),
	}
	if !slices.Equal(c.Args, want) {
		t.Fatalf("args\n got %q\nwant %q", c.Args, want)
	}
	if c.Image != "importer:dev" || p.Spec.RestartPolicy != "Never" || c.TerminationMessagePath != "/dev/termination-log" {
		t.Fatalf("container: %+v", c)
	}
	if p.Spec.Volumes[0].Secret.SecretName != "dvcr-tls" || p.Spec.Volumes[1].Secret.SecretName != "dvcr-pusher" {
		t.Fatalf("volumes: %+v", p.Spec.Volumes)
	}
	if got := testConfig.RegistryURL("tiny"); got != "dvcr.d8-virtualization.svc/cvi/tiny:latest" {
		t.Fatal(got)
	}
}

func TestPodName(t *testing.T) {
	for _, name := range []string{"a", strings.Repeat("x", 240), strings.Repeat("y", 253), strings.Repeat("y", 252) + "z"} {
		n := PodName(name)
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			t.Errorf("%d characters: %q: %v", len(name), n, msgs)
		}
	}
	if PodName(strings.Repeat("y", 253)) == PodName(strings.Repeat("y", 252)+"z") {
		t.Error("long names collide")
	}
}
