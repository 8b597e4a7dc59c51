package importerpod

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func TestContainerAndSpec(t *testing.T) {
	c := Container("importer:dev", logopts.Options{Level: "debug", Format: "text"})
	if !slices.Equal(c.Args, []string{"--log-level=debug", "--log-format=text"}) {
		t.Errorf("args %q, want the log options first", c.Args)
	}
	if c.Name != "importer" || c.Image != "importer:dev" || c.TerminationMessagePath != contract.DefaultTerminationMessagePath ||
		c.ReadinessProbe.HTTPGet.Port.IntValue() != MetricsPort || len(c.Ports) != 1 || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Fatalf("container %+v", c)
	}
	s := Spec(c, []corev1.Volume{{Name: "scratch"}})
	if s.RestartPolicy != corev1.RestartPolicyNever || *s.AutomountServiceAccountToken || len(s.Containers) != 1 || len(s.Volumes) != 1 {
		t.Fatalf("spec %+v", s)
	}
	if got := Flag(contract.FlagSourceURL, "http://x"); got != "--"+contract.FlagSourceURL+"=http://x" {
		t.Fatal(got)
	}
}

func TestMetricsURL(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.7"}}
	if got, want := MetricsURL(pod), "http://10.0.0.7:8080"+contract.MetricsPath; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

func TestExternalUploadURL(t *testing.T) {
	nodePort := func(typ corev1.ServiceType, port int32) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80, NodePort: port}}}}
	}
	onNode := &corev1.Pod{Status: corev1.PodStatus{HostIP: "10.213.0.1"}}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		pod  *corev1.Pod
		want string
	}{
		{"a node port", nodePort(corev1.ServiceTypeNodePort, 31234), onNode, "http://10.213.0.1:31234/upload"},
		{"a cluster IP only", nodePort(corev1.ServiceTypeClusterIP, 0), onNode, ""},
		{"no port allocated yet", nodePort(corev1.ServiceTypeNodePort, 0), onNode, ""},
		{"the pod's node not known yet", nodePort(corev1.ServiceTypeNodePort, 31234), &corev1.Pod{}, ""},
		{"no service read", nil, onNode, ""},
	} {
		if got := ExternalUploadURL(tc.svc, tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	urls := UploadURLs("vd-upload-a", "ns", nodePort(corev1.ServiceTypeNodePort, 31234), onNode)
	if urls.InCluster != "http://vd-upload-a.ns.svc/upload" || !strings.Contains(UploadHint(urls), "http://10.213.0.1:31234/upload") {
		t.Errorf("urls %+v, hint %s", urls, UploadHint(urls))
	}
}
