package virtoperator

import (
	"encoding/base64"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// APIServiceGVK is the kind of the subresources APIService. It is built unstructured, so that the
// core does not need the aggregator's types for one object.
var APIServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// subresourcesAPIService registers one version of virt-api's group, as KubeVirt registers v1 and
// v1alpha3.
func (in Install) subresourcesAPIService(version string, c Certs) *unstructured.Unstructured {
	m := in.clusterMeta(version+"."+virtapicontract.SubresourcesGroup, APIName)
	labels := map[string]any{}
	for k, v := range m.Labels {
		labels[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": m.Name, "labels": labels},
		"spec": map[string]any{
			"group":   virtapicontract.SubresourcesGroup,
			"version": version,
			"service": map[string]any{"namespace": in.Namespace, "name": APIService, "port": int64(443)},
			// KubeVirt's priorities: the group sorts after the built-in ones.
			"caBundle":             base64.StdEncoding.EncodeToString(c.Bundle),
			"groupPriorityMinimum": int64(1000),
			"versionPriority":      int64(15),
		},
	}}
	u.SetGroupVersionKind(APIServiceGVK)
	return u
}

// webhook is one of virt-api's admission webhooks: path on its webhook server, the kubevirt.io
// resource it admits and the operations. The rewriter renames the rules for the cluster and the
// AdmissionReviews back for virt-api.
type webhook struct {
	name     string
	path     string
	resource string
	ops      []admissionregistrationv1.OperationType
}

var (
	create = admissionregistrationv1.Create
	update = admissionregistrationv1.Update
)

// Webhook names and paths are KubeVirt's.
var (
	validating = []webhook{
		{"virtualmachineinstances-create-validator.kubevirt.io", virtapicontract.PathVMICreate, "virtualmachineinstances", []admissionregistrationv1.OperationType{create}},
		{"virtualmachineinstances-update-validator.kubevirt.io", virtapicontract.PathVMIUpdate, "virtualmachineinstances", []admissionregistrationv1.OperationType{update}},
		{"virtualmachine-validator.kubevirt.io", virtapicontract.PathVM, "virtualmachines", []admissionregistrationv1.OperationType{create, update}},
		{"virtualmachinereplicaset-validator.kubevirt.io", virtapicontract.PathVMIRS, "virtualmachineinstancereplicasets", []admissionregistrationv1.OperationType{create, update}},
		{"migration-create-validator.kubevirt.io", virtapicontract.PathMigration, "virtualmachineinstancemigrations", []admissionregistrationv1.OperationType{create}},
		{"virtualmachinepreset-validator.kubevirt.io", virtapicontract.PathPreset, "virtualmachineinstancepresets", []admissionregistrationv1.OperationType{create, update}},
	}
	mutating = []webhook{
		{"virtualmachineinstances-mutator.kubevirt.io", virtapicontract.PathVMIMutate, "virtualmachineinstances", []admissionregistrationv1.OperationType{create}},
		{"virtualmachines-mutator.kubevirt.io", virtapicontract.PathVMMutate, "virtualmachines", []admissionregistrationv1.OperationType{create, update}},
	}
)

func (in Install) clientConfig(path string, c Certs) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{
			Namespace: in.Namespace, Name: WebhookService, Path: ptr(path), Port: ptr(int32(443)),
		},
		CABundle: c.Bundle,
	}
}

func rules(w webhook) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: w.ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{kubevirtv1.GroupVersion.Group}, APIVersions: []string{"v1", "v1alpha3"},
			Resources: []string{w.resource}, Scope: ptr(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// The webhooks fail closed, as KubeVirt's: an object that skipped validation could break the
// controllers.
func (in Install) validatingWebhooks(c Certs) *admissionregistrationv1.ValidatingWebhookConfiguration {
	out := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: in.clusterMeta(ValidatingWebhooks, APIName)}
	for _, w := range validating {
		out.Webhooks = append(out.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: w.name, ClientConfig: in.clientConfig(w.path, c), Rules: rules(w),
			FailurePolicy: ptr(admissionregistrationv1.Fail), MatchPolicy: ptr(admissionregistrationv1.Equivalent),
			SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), TimeoutSeconds: ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1"},
		})
	}
	return out
}

func (in Install) mutatingWebhooks(c Certs) *admissionregistrationv1.MutatingWebhookConfiguration {
	out := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: in.clusterMeta(MutatingWebhooks, APIName)}
	for _, w := range mutating {
		out.Webhooks = append(out.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: w.name, ClientConfig: in.clientConfig(w.path, c), Rules: rules(w),
			FailurePolicy: ptr(admissionregistrationv1.Fail), MatchPolicy: ptr(admissionregistrationv1.Equivalent),
			SideEffects: ptr(admissionregistrationv1.SideEffectClassNone), TimeoutSeconds: ptr(int32(10)),
			ReinvocationPolicy:      ptr(admissionregistrationv1.NeverReinvocationPolicy),
			AdmissionReviewVersions: []string{"v1"},
		})
	}
	return out
}

// WebhookConfigurations are the validating and mutating webhook configurations alone, for an
// installation that runs virt-api without the operator and registers only its webhooks.
func (in Install) WebhookConfigurations(c Certs) []client.Object {
	return []client.Object{in.validatingWebhooks(c), in.mutatingWebhooks(c)}
}
