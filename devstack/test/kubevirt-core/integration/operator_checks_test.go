package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// What TestOperatorInstallsAndRemovesTheCore checks of an installed core: the objects' shape, what the
// apiserver stores (renamed), the RBAC it grants, and a second KubeVirt being refused.

// empty is a fresh object of the built object's kind, to Get into.
func empty(o client.Object) client.Object {
	if u, ok := o.(*unstructured.Unstructured); ok {
		e := &unstructured.Unstructured{}
		e.SetGroupVersionKind(u.GroupVersionKind())
		return e
	}
	return o.DeepCopyObject().(client.Object)
}

func describe(o client.Object) string {
	return fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())
}

func parsePEMCert(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// sar asks, through the rewriter and in kubevirt.io terms, whether user may do verb on
// resource[/subresource].
func sar(ctx context.Context, fx *fixture, user, ns, group, resource, verb string) (bool, error) {
	res, sub, _ := strings.Cut(resource, "/")
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Group: group, Version: "v1", Resource: res, Subresource: sub, Verb: verb,
		},
	}}
	if err := fx.client.Create(ctx, review); err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// checkShape looks at the installation as the core sees it, in kubevirt.io terms.
func checkShape(t *testing.T, fx *fixture, ns string) {
	ctx := testenv.Context(t)
	var api appsv1.Deployment
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, &api); err != nil {
		t.Fatal(err)
	}
	spec := api.Spec.Template.Spec
	if api.Spec.Selector.MatchLabels[kubevirtv1.AppLabel] != "virt-api" || api.Spec.Template.Labels[kubevirtv1.AppLabel] != "virt-api" ||
		api.Labels[kubevirtv1.ManagedByLabel] != "virt-operator" || *api.Spec.Replicas != 1 {
		t.Errorf("virt-api labels %v selector %v replicas %d", api.Labels, api.Spec.Selector, *api.Spec.Replicas)
	}
	if len(spec.Containers) != 4 || spec.Containers[0].Image != "d8v.local/virt-api:dev" || spec.Containers[1].Image != "d8v.local/kube-api-rewriter:dev" ||
		!slices.Contains(spec.Containers[1].Args, "--webhook-listen=:24192") ||
		spec.Containers[2].Image != "d8v.local/kube-rbac-proxy:dev" || spec.Containers[3].Image != "d8v.local/kube-rbac-proxy:dev" {
		t.Errorf("virt-api containers %+v", spec.Containers)
	}
	if ref := metav1.GetControllerOf(&api); ref == nil || ref.Kind != "KubeVirt" || ref.APIVersion != "kubevirt.io/v1" {
		t.Errorf("virt-api owner %+v", api.OwnerReferences)
	}
	var handler appsv1.DaemonSet
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-handler"}, &handler); err != nil {
		t.Fatal(err)
	}
	if hs := handler.Spec.Template.Spec; hs.Containers[0].Env[0].Name != "NODE_NAME" || hs.Volumes[0].HostPath.Path != "/var/lib/kubelet/pods" {
		t.Errorf("virt-handler pod spec %+v", hs)
	}
	// virt-api's serving certificate chains to the bundle the APIService and webhooks trust.
	var certs, ca corev1.Secret
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: virtoperator.APICertSecret}, &certs); err != nil {
		t.Fatal(err)
	}
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: virtoperator.CASecret}, &ca); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.Data["ca.crt"])
	leaf, err := parsePEMCert(certs.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "virt-api." + ns + ".svc"}); err != nil {
		t.Errorf("virt-api certificate: %v", err)
	}
	apiService := &unstructured.Unstructured{}
	apiService.SetGroupVersionKind(virtoperator.APIServiceGVK)
	if err := fx.client.Get(ctx, client.ObjectKey{Name: "v1.subresources.kubevirt.io"}, apiService); err != nil {
		t.Fatal(err)
	}
	if svc, _, _ := unstructured.NestedString(apiService.Object, "spec", "service", "namespace"); svc != ns {
		t.Errorf("APIService points at namespace %q", svc)
	}
}

// checkStoredRenamed looks at the installation as the cluster holds it, with the admin's client:
// the rewriter renamed the groups, kinds and label keys on the way.
func checkStoredRenamed(t *testing.T, fx *fixture, ns string) {
	ctx := testenv.Context(t)
	kube := fx.env.Kube
	api, err := kube.AppsV1().Deployments(ns).Get(ctx, "virt-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const renamedLabel = "kubevirt.internal.virtualization.deckhouse.io"
	if api.Labels[renamedLabel] != "virt-api" || api.Labels["kubevirt.io"] != "" ||
		api.Labels["app.kubernetes.io/managed-by"] != managedByRenamed ||
		api.Spec.Selector.MatchLabels[renamedLabel] != "virt-api" || api.Spec.Template.Labels[renamedLabel] != "virt-api" ||
		api.Spec.Template.Annotations[renamedLabel+"/certificates-hash"] == "" {
		t.Errorf("stored virt-api labels %v selector %v template %v %v", api.Labels, api.Spec.Selector, api.Spec.Template.Labels, api.Spec.Template.Annotations)
	}
	if ref := api.OwnerReferences; len(ref) != 1 || ref[0].APIVersion != renamedGroup+"/v1" || ref[0].Kind != "InternalVirtualizationKubeVirt" {
		t.Errorf("stored virt-api owner %+v", ref)
	}

	role, err := kube.RbacV1().ClusterRoles().Get(ctx, "kubevirt-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var renamed []string
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "kubevirt.io") {
			t.Errorf("stored rule still names kubevirt.io: %+v", r)
		}
		if slices.Contains(r.APIGroups, renamedGroup) {
			renamed = append(renamed, r.Resources...)
		}
	}
	for _, want := range []string{"internalvirtualizationvirtualmachines", "internalvirtualizationvirtualmachines/status", "internalvirtualizationvirtualmachineinstances"} {
		if !slices.Contains(renamed, want) {
			t.Errorf("stored kubevirt-controller rules lack %s: %v", want, renamed)
		}
	}
	edit, err := kube.RbacV1().ClusterRoles().Get(ctx, "kubevirt.io:edit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// subresources.kubevirt.io is virt-api's own group: never renamed.
	found := false
	for _, r := range edit.Rules {
		found = found || (slices.Contains(r.APIGroups, "subresources.kubevirt.io") && slices.Contains(r.Resources, "virtualmachines/start"))
	}
	if !found || edit.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" {
		t.Errorf("stored kubevirt.io:edit %v %+v", edit.Labels, edit.Rules)
	}

	// A rule without groups (a non-resource URL) passes the rewriter as it is.
	reader, err := kube.RbacV1().ClusterRoles().Get(ctx, virtoperator.MetricsReaderRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("stored metrics reader rules %+v", reader.Rules)
	}
	metrics, err := kube.CoreV1().Services(ns).Get(ctx, virtoperator.MetricsService(virtoperator.HandlerName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if metrics.Labels["prometheus.kubevirt.internal.virtualization.deckhouse.io"] != "true" || metrics.Spec.Selector[renamedLabel] != "virt-handler" {
		t.Errorf("stored virt-handler metrics Service labels %v selector %v", metrics.Labels, metrics.Spec.Selector)
	}

	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, virtoperator.ValidatingWebhooks, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		r := w.Rules[0]
		if !slices.Equal(r.APIGroups, []string{renamedGroup}) || len(r.Resources) != 1 || !strings.HasPrefix(r.Resources[0], "internalvirtualization") ||
			w.ClientConfig.Service.Name != virtoperator.WebhookService {
			t.Errorf("stored webhook %s: rules %+v service %+v", w.Name, w.Rules, w.ClientConfig.Service)
		}
	}

	stored, err := fx.env.Dynamic.Resource(internalKubeVirts).Namespace(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.GetKind() != "InternalVirtualizationKubeVirt" || !slices.Contains(stored.GetFinalizers(), virtoperator.Finalizer) {
		t.Errorf("stored KubeVirt %s finalizers %v", stored.GetKind(), stored.GetFinalizers())
	}
}

// checkRBAC asks the apiserver's authorizer: the components' accounts may do what their code
// does and no more, and users bound to the cluster's edit role may run VMs through the
// aggregated kubevirt.io:edit.
func checkRBAC(t *testing.T, fx *fixture, ns string) {
	ctx := testenv.Context(t)
	if _, err := fx.env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := func(name string) string { return "system:serviceaccount:" + ns + ":" + name }
	tests := []struct {
		user, group, resource, verb string
		want                        bool
	}{
		{sa("kubevirt-controller"), "kubevirt.io", "virtualmachineinstances", "create", true},
		{sa("kubevirt-controller"), "kubevirt.io", "virtualmachines/status", "update", true},
		{sa("kubevirt-controller"), "", "pods", "create", true},
		{sa("kubevirt-controller"), "", "secrets", "get", false},
		{sa("kubevirt-handler"), "kubevirt.io", "virtualmachineinstances", "update", true},
		{sa("kubevirt-handler"), "kubevirt.io", "virtualmachineinstances", "delete", false},
		{sa("kubevirt-handler"), "", "pods/status", "patch", true},
		{sa("kubevirt-apiserver"), "kubevirt.io", "virtualmachineinstancepresets", "list", true},
		{sa("kubevirt-apiserver"), "kubevirt.io", "virtualmachines", "delete", false},
		{"alice", "kubevirt.io", "virtualmachines", "create", true},
		{"alice", "subresources.kubevirt.io", "virtualmachines/start", "update", true},
		{"alice", "kubevirt.io", "kubevirts", "delete", false},
		// Every pod's kube-rbac-proxies review the scrapes' tokens and access.
		{sa("kubevirt-controller"), "authentication.k8s.io", "tokenreviews", "create", true},
		{sa("kubevirt-handler"), "authentication.k8s.io", "tokenreviews", "create", true},
		{sa("kubevirt-apiserver"), "authentication.k8s.io", "tokenreviews", "create", true},
		{sa("kubevirt-controller"), "authorization.k8s.io", "subjectaccessreviews", "create", true},
		{sa("kubevirt-handler"), "authorization.k8s.io", "subjectaccessreviews", "create", true},
		{sa("kubevirt-apiserver"), "authorization.k8s.io", "subjectaccessreviews", "create", true},
	}
	// A scraper bound to the metrics reader may get /metrics, and nothing else; alice may not.
	if _, err := fx.env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: virtoperator.MetricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "scraper"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fx.env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), "scraper-"+ns, metav1.DeleteOptions{})
	})
	for _, tt := range []struct {
		user, path, verb string
		want             bool
	}{
		{"scraper", "/metrics", "get", true},
		{"scraper", "/healthz/etcd", "get", false},
		{"scraper", "/metrics", "post", false},
		{"alice", "/metrics", "get", false},
	} {
		eventually(t, fmt.Sprintf("%s %s %s", tt.user, tt.verb, tt.path), func(ctx context.Context) error {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: tt.user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: tt.path, Verb: tt.verb},
			}}
			if err := fx.client.Create(ctx, review); err != nil {
				return err
			}
			if review.Status.Allowed != tt.want {
				return fmt.Errorf("allowed %v, want %v", review.Status.Allowed, tt.want)
			}
			return nil
		})
	}
	for _, tt := range tests {
		// Aggregation into edit happens in the controller manager, a moment after the roles.
		eventually(t, fmt.Sprintf("%s %s %s/%s", tt.user, tt.verb, tt.group, tt.resource), func(ctx context.Context) error {
			got, err := sar(ctx, fx, tt.user, ns, tt.group, tt.resource, tt.verb)
			if err != nil {
				return err
			}
			if got != tt.want {
				return fmt.Errorf("allowed %v, want %v", got, tt.want)
			}
			return nil
		})
	}
}

// checkSecondKubeVirt creates a second KubeVirt while the first is installed: it is told so and
// gets nothing installed.
func checkSecondKubeVirt(t *testing.T, fx *fixture) {
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	second := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}}
	if err := fx.client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "second KubeVirt told", func(ctx context.Context) error {
		var kv kubevirtv1.KubeVirt
		if err := fx.client.Get(ctx, client.ObjectKeyFromObject(second), &kv); err != nil {
			return err
		}
		c := kvCondition(&kv, kubevirtv1.KubeVirtConditionSynchronized)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != virtoperator.ReasonExisting || len(kv.Finalizers) != 0 {
			return fmt.Errorf("conditions %+v finalizers %v", kv.Status.Conditions, kv.Finalizers)
		}
		return nil
	})
	var deployments appsv1.DeploymentList
	if err := fx.client.List(ctx, &deployments, client.InNamespace(ns)); err != nil || len(deployments.Items) != 0 {
		t.Errorf("deployments in the second KubeVirt's namespace: %d, %v", len(deployments.Items), err)
	}
	if err := fx.client.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, fx, second); err != nil {
		t.Errorf("second KubeVirt stays: %v", err)
	}
}
