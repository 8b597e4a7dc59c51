package importerpod

import (
	"slices"
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
