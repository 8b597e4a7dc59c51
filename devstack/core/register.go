package core

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// register puts virt-api behind a Service and the subresources.kubevirt.io APIService, and
// reports ready once the aggregator finds it available. It is idempotent, as Up may run it again.
func register(ctx context.Context, s *controlplane.Stack, host localnet.Host) error {
	cfg, err := s.RESTConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(s.CAFile())
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	port, proto, ready, portName := int32(8443), corev1.ProtocolTCP, true, "https"
	objects := []func() error{
		func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Services(Namespace).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "virt-api"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
					Name: portName, Port: 443, TargetPort: intstr.FromInt32(port), Protocol: proto,
				}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			slice := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "virt-api", Labels: map[string]string{
					discoveryv1.LabelServiceName: "virt-api", discoveryv1.LabelManagedBy: "devcluster",
				}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host.IP.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
				Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
			}
			_, err := kube.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, slice, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// The host may have a new address after a restart of the stack.
				old, gerr := kube.DiscoveryV1().EndpointSlices(Namespace).Get(ctx, "virt-api", metav1.GetOptions{})
				if gerr != nil {
					return gerr
				}
				slice.ResourceVersion = old.ResourceVersion
				_, err = kube.DiscoveryV1().EndpointSlices(Namespace).Update(ctx, slice, metav1.UpdateOptions{})
			}
			return err
		},
	}
	// Both versions virt-api serves, as virt-operator registers them.
	for _, version := range virtapicontract.SubresourcesVersions {
		objects = append(objects, func() error {
			svc := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
				"metadata": map[string]any{"name": version + "." + virtapicontract.SubresourcesGroup},
				"spec": map[string]any{
					"group": virtapicontract.SubresourcesGroup, "version": version,
					"service":              map[string]any{"namespace": Namespace, "name": "virt-api", "port": int64(443)},
					"caBundle":             base64.StdEncoding.EncodeToString(ca),
					"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
				},
			}}
			_, err := dyn.Resource(apiServices).Apply(ctx, svc.GetName(), svc, metav1.ApplyOptions{FieldManager: "devcluster", Force: true})
			return err
		})
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	got, err := dyn.Resource(apiServices).Get(ctx, "v1.subresources.kubevirt.io", metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Available" {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("APIService v1.subresources.kubevirt.io: %v", m["message"])
		}
	}
	return fmt.Errorf("APIService v1.subresources.kubevirt.io has no Available condition yet")
}
