package cvi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func image(mut ...func(*v1alpha2.ClusterVirtualImage)) *v1alpha2.ClusterVirtualImage {
	c := &v1alpha2.ClusterVirtualImage{
		ObjectMeta: metav1.ObjectMeta{Name: "tiny", UID: "uid-1", Generation: 1, Finalizers: []string{Finalizer}},
		Spec: v1alpha2.ClusterVirtualImageSpec{DataSource: v1alpha2.ClusterVirtualImageDataSource{
			Type: v1alpha2.DataSourceTypeHTTP,
			HTTP: &v1alpha2.DataSourceHTTP{URL: "http://10.0.0.1/tiny.qcow2", Checksum: &v1alpha2.Checksum{SHA256: strings.Repeat("a", 64)}},
		}},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func importer(owner string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cvi-importer-tiny", Namespace: "d8-virtualization", UID: "pod-1",
		OwnerReferences: []metav1.OwnerReference{{UID: types.UID("uid-" + owner)}}}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func exited(msg string, code int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: importerContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}}}}
	}
}

func TestDecide(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name string
		cvi  *v1alpha2.ClusterVirtualImage
		pod  *corev1.Pod
		want Step
	}{
		{"new image", image(func(c *v1alpha2.ClusterVirtualImage) { c.Finalizers = nil }), nil, StepAddFinalizer},
		{"no pod yet", image(), nil, StepCreatePod},
		{"pod running", image(), importer("1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), StepWatchProgress},
		{"pod pending", image(), importer("1"), StepWatchProgress},
		{"pod succeeded", image(), importer("1", exited(`{"reason":"Completed"}`, 0)), StepRecordResult},
		{"container terminated, pod still running", image(), importer("1", exited(`{"reason":"Completed"}`, 0), func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), StepRecordResult},
		{"pod failed", image(), importer("1", exited(`{"reason":"ChecksumMismatch"}`, 20)), StepRecordResult},
		{"pod of an older image of that name", image(), importer("0"), StepDeletePod},
		{"ready, pod left", image(func(c *v1alpha2.ClusterVirtualImage) {
			c.Status.Phase, c.Status.ObservedGeneration = v1alpha2.ImageReady, 1
		}), importer("1", exited("", 0)), StepDeletePod},
		{"ready", image(func(c *v1alpha2.ClusterVirtualImage) {
			c.Status.Phase, c.Status.ObservedGeneration = v1alpha2.ImageReady, 1
		}), nil, StepNone},
		{"failed", image(func(c *v1alpha2.ClusterVirtualImage) {
			c.Status.Phase, c.Status.ObservedGeneration = v1alpha2.ImageFailed, 1
		}), nil, StepNone},
		{"ready for an older generation", image(func(c *v1alpha2.ClusterVirtualImage) { c.Status.Phase, c.Generation = v1alpha2.ImageReady, 2 }), nil, StepCreatePod},
		{"registry source", image(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage, ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "r/i"}}
		}), nil, StepUnsupportedSource},
		{"caBundle", image(func(c *v1alpha2.ClusterVirtualImage) { c.Spec.DataSource.HTTP.CABundle = []byte("pem") }), nil, StepUnsupportedSource},
		{"deleting with pod", image(func(c *v1alpha2.ClusterVirtualImage) { c.DeletionTimestamp = &now }), importer("1"), StepCleanup},
		{"deleting", image(func(c *v1alpha2.ClusterVirtualImage) { c.DeletionTimestamp = &now }), nil, StepCleanup},
		{"deleting, finalizer gone", image(func(c *v1alpha2.ClusterVirtualImage) { c.DeletionTimestamp, c.Finalizers = &now, nil }), nil, StepNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.cvi, tc.pod); got != tc.want {
				t.Fatalf("Decide = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestResultOf(t *testing.T) {
	cases := []struct {
		name       string
		pod        *corev1.Pod
		wantReason contract.Reason
		wantMsg    string
	}{
		{"completed", importer("1", exited(`{"reason":"Completed","format":"qcow2","unpackedSize":5}`, 0)), contract.ReasonCompleted, ""},
		{"checksum", importer("1", exited(`{"reason":"ChecksumMismatch","message":"the sha256 differs"}`, 20)), contract.ReasonChecksumMismatch, "the sha256 differs"},
		{"no message", importer("1", exited("", 137)), contract.ReasonInternal, "exited with code 137"},
		{"pod failed before the container ran", importer("1", func(p *corev1.Pod) { p.Status.Phase, p.Status.Message = corev1.PodFailed, "evicted" }), contract.ReasonInternal, "without its container terminating: evicted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ResultOf(tc.pod)
			if r.Reason != tc.wantReason || !strings.Contains(r.Message, tc.wantMsg) {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestInDVCR(t *testing.T) {
	for phase, want := range map[v1alpha2.ImagePhase]bool{"": false, v1alpha2.ImagePending: false, v1alpha2.ImageProvisioning: true, v1alpha2.ImageReady: true, v1alpha2.ImageFailed: false} {
		if got := InDVCR(image(func(c *v1alpha2.ClusterVirtualImage) { c.Status.Phase = phase })); got != want {
			t.Errorf("%q: %v, want %v", phase, got, want)
		}
	}
}
