package image_test

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/controller/cvi"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
	"github.com/d8virt/virtualization-controller/pkg/controller/vi"
)

var testConfig = image.PodConfig{Namespace: "d8-virtualization", Image: "importer:dev", DVCRAddress: "dvcr.d8-virtualization.svc:5000",
	DVCRPullAddress: "dvcr.d8-virtualization.svc", DVCRPusherSecret: "dvcr-pusher", DVCRTLSSecret: "dvcr-tls", UploadTimeout: time.Hour,
	Log: logopts.Options{Level: "debug", Format: "text"}}

var sha = strings.Repeat("a", 64)

func httpSource() *v1alpha2.DataSourceHTTP {
	return &v1alpha2.DataSourceHTTP{URL: "http://10.0.0.1/tiny.qcow2", Checksum: &v1alpha2.Checksum{SHA256: sha}}
}

// cviImage is the ClusterVirtualImage "tiny" with an HTTP source and its finalizer.
func cviImage(mut ...func(*v1alpha2.ClusterVirtualImage)) *v1alpha2.ClusterVirtualImage {
	c := &v1alpha2.ClusterVirtualImage{
		ObjectMeta: metav1.ObjectMeta{Name: "tiny", UID: "uid-1", Generation: 1, Finalizers: []string{image.Finalizer("cvi")}},
		Spec:       v1alpha2.ClusterVirtualImageSpec{DataSource: v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: httpSource()}},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

// viImage is the VirtualImage "ns1/tiny" in DVCR with an HTTP source and its finalizer.
func viImage(mut ...func(*v1alpha2.VirtualImage)) *v1alpha2.VirtualImage {
	v := &v1alpha2.VirtualImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "tiny", UID: "uid-1", Generation: 1, Finalizers: []string{image.Finalizer("vi")}},
		Spec: v1alpha2.VirtualImageSpec{Storage: v1alpha2.StorageContainerRegistry,
			DataSource: v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: httpSource()}},
	}
	for _, m := range mut {
		m(v)
	}
	return v
}

func cviView(mut ...func(*v1alpha2.ClusterVirtualImage)) image.Image {
	return image.View(cvi.Kind{}, cviImage(mut...))
}

func viView(mut ...func(*v1alpha2.VirtualImage)) image.Image {
	return image.View(vi.Kind{}, viImage(mut...))
}

// importer is an importer Pod of the image with UID "uid-"+owner.
func importer(owner string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cvi-importer-tiny", Namespace: "d8-virtualization", UID: "pod-1",
		Labels: map[string]string{image.LabelImageUID: "uid-" + owner}}}
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
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "importer",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}}}}
	}
}
