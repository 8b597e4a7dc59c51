package nodeagent

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A status the API has already is not written again; a changed one is.
func TestUpdateStatusSkipsNoChange(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable}}
	kube := fake.NewClientset(pod.DeepCopy())
	pods := podsClient{kube: kube}.Pods("ns")
	writes := func() int {
		n := 0
		for _, a := range kube.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	if _, err := pods.UpdateStatus(context.Background(), pod.DeepCopy(), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 0 {
		t.Errorf("%d status writes for a status the API has", n)
	}
	changed := pod.DeepCopy()
	changed.Status.PodIP = "10.0.0.5"
	got, err := pods.UpdateStatus(context.Background(), changed, metav1.UpdateOptions{})
	if err != nil || got.Status.PodIP != "10.0.0.5" || writes() != 1 {
		t.Errorf("changed status: %v, %d writes, pod IP %q", err, writes(), got.Status.PodIP)
	}
}
