package nodeagent

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestLogTails(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.log")
	if err := os.WriteFile(p, []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{{0, ""}, {1, "four\n"}, {3, "two\nthree\nfour\n"}, {10, "one\ntwo\nthree\nfour\n"}} {
		f, _ := os.Open(p)
		if err := seekTail(f, tc.n); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != tc.want {
			t.Errorf("seekTail(%d) = %q, want %q", tc.n, b, tc.want)
		}
	}
	if got := tailFile(p, 2, 100); got != "three\nfour" {
		t.Errorf("tailFile lines = %q", got)
	}
	if got := tailFile(p, 80, 6); got != "e\nfour" {
		t.Errorf("tailFile bytes = %q", got)
	}
}

func TestStartedBefore(t *testing.T) {
	pending := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("a", "ContainerCreating")}}}
	if startedBefore(pending) {
		t.Error("a pod that never ran counts as started")
	}
	for _, st := range []corev1.ContainerStatus{running("a", true), exited("a", 0), backingOff("a", 1)} {
		p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
		if !startedBefore(p) {
			t.Errorf("status %+v does not count as started", st)
		}
	}
}

func TestGracePeriod(t *testing.T) {
	five, ten := int64(5), int64(10)
	for _, tc := range []struct {
		pod  corev1.Pod
		want time.Duration
	}{
		{corev1.Pod{}, 30 * time.Second},
		{corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &ten}}, 10 * time.Second},
		{func() corev1.Pod {
			p := corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &ten}}
			p.DeletionGracePeriodSeconds = &five
			return p
		}(), 5 * time.Second},
	} {
		if got := gracePeriod(&tc.pod); got != tc.want {
			t.Errorf("grace %s, want %s", got, tc.want)
		}
	}
}

func TestNetHostName(t *testing.T) {
	uid := "3c52946e-9c52-45ca-b382-4f58b1b7ceff"
	if got := NetHostName("3c52946e-9c52-45ca-b382-4f58b1b7ceff"); got != "pod-"+uid || strings.ContainsAny(got, "/ ") {
		t.Errorf("NetHostName = %q", got)
	}
}

func TestHostPathMapsTheKubeletDirToTheRoot(t *testing.T) {
	l := Layout{Root: "/state/nodes/n1"}
	cases := map[string]string{
		"/var/lib/kubelet/pods":       "/state/nodes/n1/pods",
		"/var/lib/kubelet":            "/state/nodes/n1",
		"/var/lib/kubelet/../x":       "/var/lib/x",
		"/var/lib/kubeletx/pods":      "/var/lib/kubeletx/pods",
		"/var/lib/kubevirt/disks/":    "/var/lib/kubevirt/disks",
		"/var/lib/kubelet/pods/../..": "/var/lib",
	}
	for in, want := range cases {
		if got := l.HostPath(in); got != want {
			t.Errorf("HostPath(%q) = %q, want %q", in, got, want)
		}
	}
}
