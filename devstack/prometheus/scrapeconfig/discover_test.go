package scrapeconfig

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A slice of a Service with one ready pod address and two named ports gives two targets, each
// with the discovery's slice, endpoint, Service and Pod labels; an address without a pod, a
// slice of no known Service and a port without a number still work as the discovery does.
func TestTargets(t *testing.T) {
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "virt-handler-metrics", Labels: map[string]string{"kubevirt.internal.virtualization.deckhouse.io": "virt-handler"}}}
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-handler-x", UID: "u1", Labels: map[string]string{"app": "h"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "virt-handler", Controller: ref(true)}}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "virt-handler", Image: "h:1"},
			{Name: "kube-rbac-proxy", Image: "p:1", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8444, Protocol: corev1.ProtocolTCP}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.213.0.7", HostIP: "10.213.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	tcp := corev1.ProtocolTCP
	slice := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "virt-handler-metrics-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.213.0.7"},
			Conditions: discoveryv1.EndpointConditions{Ready: ref(true)},
			NodeName:   ref("n1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod.Name},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ref("metrics"), Port: ref[int32](8444), Protocol: &tcp}, {Name: ref("metrics-rewrite"), Port: ref[int32](8445)}, {Name: ref("none")}},
	}
	orphan := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "by-hand", Labels: map[string]string{discoveryv1.LabelServiceName: "gone"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.213.0.9"}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ref[int32](443)}},
	}
	got := Targets("ns", []discoveryv1.EndpointSlice{slice, orphan}, []corev1.Service{svc}, []corev1.Pod{pod})
	if len(got) != 3 {
		t.Fatalf("%d targets: %+v", len(got), got)
	}
	want := map[string]string{
		"__meta_kubernetes_namespace":                                                          "ns",
		"__meta_kubernetes_endpointslice_name":                                                 "virt-handler-metrics-abc",
		"__meta_kubernetes_endpointslice_address_type":                                         "IPv4",
		"__meta_kubernetes_endpointslice_label_kubernetes_io_service_name":                     "virt-handler-metrics",
		"__meta_kubernetes_endpointslice_labelpresent_kubernetes_io_service_name":              "true",
		"__meta_kubernetes_endpointslice_port":                                                 "8444",
		"__meta_kubernetes_endpointslice_port_name":                                            "metrics",
		"__meta_kubernetes_endpointslice_port_protocol":                                        "TCP",
		"__meta_kubernetes_endpointslice_address_target_kind":                                  "Pod",
		"__meta_kubernetes_endpointslice_address_target_name":                                  "virt-handler-x",
		"__meta_kubernetes_endpointslice_endpoint_conditions_ready":                            "true",
		"__meta_kubernetes_endpointslice_endpoint_node_name":                                   "n1",
		"__meta_kubernetes_service_name":                                                       "virt-handler-metrics",
		"__meta_kubernetes_service_label_kubevirt_internal_virtualization_deckhouse_io":        "virt-handler",
		"__meta_kubernetes_service_labelpresent_kubevirt_internal_virtualization_deckhouse_io": "true",
		"__meta_kubernetes_pod_name":                                                           "virt-handler-x",
		"__meta_kubernetes_pod_ip":                                                             "10.213.0.7",
		"__meta_kubernetes_pod_node_name":                                                      "n1",
		"__meta_kubernetes_pod_host_ip":                                                        "10.213.0.1",
		"__meta_kubernetes_pod_uid":                                                            "u1",
		"__meta_kubernetes_pod_phase":                                                          "Running",
		"__meta_kubernetes_pod_ready":                                                          "true",
		"__meta_kubernetes_pod_controller_kind":                                                "DaemonSet",
		"__meta_kubernetes_pod_controller_name":                                                "virt-handler",
		"__meta_kubernetes_pod_label_app":                                                      "h",
		"__meta_kubernetes_pod_labelpresent_app":                                               "true",
		"__meta_kubernetes_pod_container_name":                                                 "kube-rbac-proxy",
		"__meta_kubernetes_pod_container_image":                                                "p:1",
		"__meta_kubernetes_pod_container_port_name":                                            "metrics",
		"__meta_kubernetes_pod_container_port_number":                                          "8444",
		"__meta_kubernetes_pod_container_port_protocol":                                        "TCP",
	}
	if got[0].Targets[0] != "10.213.0.7:8444" || !reflect.DeepEqual(got[0].Labels, want) {
		t.Errorf("first target %v:\n%v\nwant\n%v", got[0].Targets, got[0].Labels, want)
	}
	if got[1].Targets[0] != "10.213.0.7:8445" || got[1].Labels["__meta_kubernetes_pod_container_name"] != "" || got[1].Labels["__meta_kubernetes_endpointslice_port_name"] != "metrics-rewrite" {
		t.Errorf("second target %+v", got[1])
	}
	if got[2].Targets[0] != "10.213.0.9:443" || got[2].Labels["__meta_kubernetes_service_name"] != "" || got[2].Labels["__meta_kubernetes_pod_name"] != "" {
		t.Errorf("third target %+v", got[2])
	}
	if empty := Targets("ns", nil, nil, nil); empty == nil || len(empty) != 0 {
		t.Errorf("no slices: %#v, want an empty list (a file Prometheus reads as no targets)", empty)
	}
}

func ref[T any](v T) *T { return &v }
