package integration

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/testenv"
)

// RBAC written through the rewriter is stored renamed, so an access review asked through it must
// be renamed too, or it would ask about names no rule grants.
func TestAccessReviewsThroughRewriter(t *testing.T) {
	forEachMode(t, func(t *testing.T, fx *fixture, m mode) {
		ctx := testenv.Context(t)
		ns := fx.env.Namespace(t)
		c := m.typed(t)
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get"}}},
		}
		if err := c.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vm-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}},
		}
		if err := c.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
		stored, err := fx.env.Kube.RbacV1().Roles(ns).Get(ctx, "vm-reader", metav1.GetOptions{})
		if err != nil || stored.Rules[0].APIGroups[0] != "internal.virtualization.deckhouse.io" {
			t.Fatalf("stored role %+v, err %v", stored.Rules, err)
		}
		for verb, want := range map[string]bool{"get": true, "delete": false} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "bob",
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: verb, Group: "kubevirt.io", Resource: "virtualmachines", Name: "any",
				},
			}}
			if err := c.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed != want {
				t.Errorf("may bob %s kubevirt.io virtualmachines? allowed=%v, want %v (%s)", verb, sar.Status.Allowed, want, sar.Status.Reason)
			}
		}
	})
}
