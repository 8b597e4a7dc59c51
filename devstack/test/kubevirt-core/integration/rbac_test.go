package integration

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/testenv"
)

// grantStart lets user start VMs in ns, with the verb and subresource KubeVirt's roles use.
func grantStart(t *testing.T, fx *fixture, ns, user string) {
	t.Helper()
	ctx := testenv.Context(t)
	rbac := fx.env.Kube.RbacV1()
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-starter"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachines/start"}, Verbs: []string{"update"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-starter"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "vm-starter"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
