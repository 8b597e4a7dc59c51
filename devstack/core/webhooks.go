package core

import (
	"context"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

// webhookPort is where virt-api's rewriter sidecar serves the admission webhooks; it renames each
// AdmissionReview for virt-api's own webhook server on 127.0.0.1:9443.
const webhookPort = 24192

// webhookCert is the sidecar's serving certificate, for the webhook Service's name.
func webhookCert(s *controlplane.Stack) (certFile, keyFile string, err error) {
	return s.IssueCert("virt-api-webhooks", []string{virtoperator.WebhookService + "." + Namespace + ".svc"}, nil)
}

// registerWebhooks puts virt-api's webhooks in front of the kubevirt.io kinds, with the
// configurations virt-operator would install, created through the users' rewriter so that
// their rules name the renamed kinds the cluster really holds. It is idempotent.
func registerWebhooks(ctx context.Context, s *controlplane.Stack, host localnet.Host) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", KubeconfigPath(s))
	if err != nil {
		return fmt.Errorf("load %s: %w", KubeconfigPath(s), err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(s.CAFile())
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	port, proto, ready, portName := int32(webhookPort), corev1.ProtocolTCP, true, "webhooks"
	objs := []client.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: virtoperator.WebhookService, Namespace: Namespace},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
				Name: portName, Port: 443, TargetPort: intstr.FromInt32(port), Protocol: proto,
			}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: virtoperator.WebhookService, Namespace: Namespace, Labels: map[string]string{
				discoveryv1.LabelServiceName: virtoperator.WebhookService, discoveryv1.LabelManagedBy: "devcluster",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host.IP.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		},
	}
	objs = append(objs, virtoperator.Install{Namespace: Namespace}.WebhookConfigurations(certs.Set{Bundle: ca})...)
	for _, o := range objs {
		if err := createOrReplace(ctx, c, o); err != nil {
			return fmt.Errorf("register webhooks: %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// createOrReplace creates o, or replaces what is there (the host's address may have changed
// since the stack last ran).
func createOrReplace(ctx context.Context, c client.Client, o client.Object) error {
	err := c.Create(ctx, o)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old := o.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(o), old); err != nil {
		return err
	}
	o.SetResourceVersion(old.GetResourceVersion())
	if svc, ok := o.(*corev1.Service); ok {
		// A Service's cluster IP is immutable once allocated.
		svc.Spec.ClusterIP = old.(*corev1.Service).Spec.ClusterIP
		svc.Spec.ClusterIPs = old.(*corev1.Service).Spec.ClusterIPs
	}
	return c.Update(ctx, o)
}
