package scrapeconfig

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// Follow rewrites a namespace's targets file as its EndpointSlices change: a Pod that comes back
// with another address is a target at that address, and the old one is gone.
func TestFollow(t *testing.T) {
	kube := fake.NewClientset()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, kube, []string{"mod"}, dir, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Follow: %v", err)
		}
	})

	waitTargets(t, dir, nil)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "api-metrics-x", Namespace: "mod", Labels: map[string]string{discoveryv1.LabelServiceName: "api-metrics"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https-metrics"), Port: ptr.To[int32](8443)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}}},
	}
	if _, err := kube.DiscoveryV1().EndpointSlices("mod").Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, dir, []string{"10.0.0.5:8443"})
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}
	if _, err := kube.DiscoveryV1().EndpointSlices("mod").Update(context.Background(), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, dir, []string{"10.0.0.9:8443"})
	if err := kube.DiscoveryV1().EndpointSlices("mod").Delete(context.Background(), slice.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTargets(t, dir, nil)
}

// waitTargets waits until the namespace's file lists exactly want.
func waitTargets(t *testing.T, dir string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = nil
		data, err := os.ReadFile(TargetsFile(dir, "mod"))
		if err == nil {
			var groups []TargetGroup
			if err := json.Unmarshal(data, &groups); err != nil {
				t.Fatalf("a half-written file? %v: %s", err, data)
			}
			for _, g := range groups {
				got = append(got, g.Targets...)
			}
			if len(got) == len(want) && (len(want) == 0 || got[0] == want[0]) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("targets %v, want %v", got, want)
}
