package debuginfo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	virtfake "github.com/d8virt/api/client/clientset/versioned/fake"
	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// The archive holds the machine's objects and only those, its launcher's Pod and logs, the
// events about them, and lists what could not be read.
func TestCollect(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "prod"} }
	virt := virtfake.NewSimpleClientset(
		&v1alpha2.VirtualMachine{ObjectMeta: meta("web"), Spec: v1alpha2.VirtualMachineSpec{BlockDeviceRefs: []v1alpha2.BlockDeviceSpecRef{{Kind: "VirtualDisk", Name: "root"}}}},
		&v1alpha2.VirtualDisk{ObjectMeta: meta("root")},
		&v1alpha2.VirtualMachineOperation{ObjectMeta: meta("web-stop-1"), Spec: v1alpha2.VirtualMachineOperationSpec{VirtualMachineName: "web"}},
		&v1alpha2.VirtualMachineOperation{ObjectMeta: meta("db-stop-1"), Spec: v1alpha2.VirtualMachineOperationSpec{VirtualMachineName: "db"}},
	)
	launcher := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-web-abcde", Namespace: "prod", Labels: map[string]string{"kubevirt.internal.virtualization.deckhouse.io": "virt-launcher"}, Annotations: map[string]string{domainAnnotation: "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "compute"}}},
	}
	kube := kubefake.NewClientset(launcher,
		&corev1.Event{ObjectMeta: meta("e1"), InvolvedObject: corev1.ObjectReference{Name: "web-stop-1"}, Reason: "Stopping"},
		&corev1.Event{ObjectMeta: meta("e2"), InvolvedObject: corev1.ObjectReference{Name: "db"}, Reason: "Other"},
	)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{internalVM: "List", internalVMI: "List"})
	dyn.PrependReactor("get", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	var buf bytes.Buffer
	c := Collector{Virt: virt, Kube: kube, Dynamic: dyn, Now: func() time.Time { return time.Unix(1e9, 0) }}
	if err := c.Collect(context.Background(), &buf, "prod", "web"); err != nil {
		t.Fatal(err)
	}
	files := untar(t, &buf)
	for name, want := range map[string]string{
		"virtualmachine.yaml":                      "name: web",
		"virtualdisks/root.yaml":                   "name: root",
		"virtualmachineoperations.yaml":            "web-stop-1",
		"pods/virt-launcher-web-abcde.yaml":        "compute",
		"logs/virt-launcher-web-abcde/compute.log": "fake logs",
		"events.yaml":                              "Stopping",
		"errors.txt":                               "internal/virtualmachine.yaml: forbidden",
	} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s lacks %q: %q", name, want, files[name])
		}
	}
	if strings.Contains(files["virtualmachineoperations.yaml"], "db-stop-1") || strings.Contains(files["events.yaml"], "Other") {
		t.Errorf("another machine's objects in the archive:\n%s\n%s", files["virtualmachineoperations.yaml"], files["events.yaml"])
	}
	if err := c.Collect(context.Background(), io.Discard, "prod", "nope"); err == nil || !strings.Contains(err.Error(), "VirtualMachine prod/nope") {
		t.Errorf("a missing machine: %v", err)
	}
}

func untar(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}
