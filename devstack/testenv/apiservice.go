package testenv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// RegisterAPIService routes group/version through the aggregation layer to port 443 of the Service
// namespace/service (see ExposeService), trusting caBundle (PEM) for its serving certificate, and
// waits until the apiserver reports it Available. The APIService is deleted when the test ends:
// it is cluster wide, and one whose server is gone makes discovery fail for every client.
func (e *Env) RegisterAPIService(t testing.TB, group, version, namespace, service string, caBundle []byte) {
	t.Helper()
	ctx := Context(t)
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": version + "." + group},
		"spec": map[string]any{
			"group": group, "version": version,
			"service":              map[string]any{"namespace": namespace, "name": service, "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(caBundle),
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		},
	}}
	client := e.Dynamic.Resource(apiServices)
	if _, err := client.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create APIService %s: %v", svc.GetName(), err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), svc.GetName(), metav1.DeleteOptions{}) })

	last := errors.New("no Available condition yet")
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, svc.GetName(), metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Available" {
				continue
			}
			if m["status"] == "True" {
				return true, nil
			}
			// Why it is not available, e.g. FailedDiscoveryCheck with the error, for the failure.
			last = fmt.Errorf("%v: %v", m["reason"], m["message"])
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("APIService %s never became Available: %v", svc.GetName(), last)
	}
}
