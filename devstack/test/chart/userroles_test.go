package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/d8virt/devstack/testenv"
)

const (
	friendlyGroup    = "virtualization.deckhouse.io"
	subresourceGroup = "subresources.virtualization.deckhouse.io"
	userRolesFile    = "templates/user-roles.yaml"
)

// userRoles are the chart's user-facing ClusterRoles by the stock role each aggregates into.
var userRoles = map[string]string{"view": "user-view", "edit": "user-edit", "admin": "user-admin"}

// friendlyCRDs are the chart's CRDs of the friendly group.
func friendlyCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", friendlyGroup+"_*.yaml"))
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crds, err := testenv.DecodeCRDs(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		t.Fatal("the chart has no CRDs of " + friendlyGroup)
	}
	return out
}

// grants says whether the rules allow verb on group's resource (resource/sub for a subresource).
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
	})
}

// coreGroup says whether group is the core's: kubevirt.io's (renamed or not) or its subresources.
func coreGroup(group string) bool {
	for _, g := range []string{"kubevirt.io", "internal.virtualization.deckhouse.io"} {
		if group == g || strings.HasSuffix(group, "."+g) {
			return true
		}
	}
	return false
}

// The user-facing ClusterRoles aggregate into view, edit and admin: view reads every friendly
// kind, edit writes the namespaced ones and opens the console, VNC and ports and hot-plugs, admin
// freezes; none names the core's groups, and view grants no subresource.
func TestUserRoles(t *testing.T) {
	t.Parallel()
	crds := friendlyCRDs(t)
	for render, objs := range renders(t) {
		roles := map[string]*rbacv1.ClusterRole{}
		for stock, name := range userRoles {
			role := into[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", release+"-"+name))
			roles[stock] = role
			for label, v := range role.Labels {
				if after, ok := strings.CutPrefix(label, "rbac.authorization.k8s.io/aggregate-to-"); ok && (after != stock || v != "true") {
					t.Errorf("%s: ClusterRole %s has %s=%s, want only aggregate-to-%s", render, role.Name, label, v, stock)
				}
			}
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+stock] != "true" {
				t.Errorf("%s: ClusterRole %s does not aggregate to %s", render, role.Name, stock)
			}
			for _, r := range role.Rules {
				for _, g := range r.APIGroups {
					if coreGroup(g) {
						t.Errorf("%s: ClusterRole %s grants %v on %s, a group of the core", render, role.Name, r.Verbs, g)
					}
				}
			}
		}
		for _, crd := range crds {
			plural := crd.Spec.Names.Plural
			for _, verb := range []string{"get", "list", "watch"} {
				if !grants(roles["view"].Rules, friendlyGroup, plural, verb) {
					t.Errorf("%s: view cannot %s %s", render, verb, plural)
				}
			}
			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				continue
			}
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				if !grants(roles["edit"].Rules, friendlyGroup, plural, verb) {
					t.Errorf("%s: edit cannot %s %s", render, verb, plural)
				}
			}
		}
		for _, r := range roles["view"].Rules {
			for _, res := range r.Resources {
				if strings.Contains(res, "/") {
					t.Errorf("%s: view grants the subresource %s", render, res)
				}
			}
			for _, v := range r.Verbs {
				if !slices.Contains([]string{"get", "list", "watch"}, v) {
					t.Errorf("%s: view grants %s on %v", render, v, r.Resources)
				}
			}
		}
		for sub, verb := range map[string]string{"console": "get", "vnc": "get", "portforward": "get", "addvolume": "update", "removevolume": "update"} {
			if !grants(roles["edit"].Rules, subresourceGroup, "virtualmachines/"+sub, verb) {
				t.Errorf("%s: edit cannot %s virtualmachines/%s", render, verb, sub)
			}
		}
		for _, sub := range []string{"freeze", "unfreeze"} {
			if !grants(roles["admin"].Rules, subresourceGroup, "virtualmachines/"+sub, "update") {
				t.Errorf("%s: admin cannot update virtualmachines/%s", render, sub)
			}
		}
	}
}

// On a real apiserver the chart's user roles aggregate into the stock ones: a user bound to edit
// in a namespace may open a VM's console and hot-plug there, not in another namespace, and never
// the core's VMI console; a user bound to view may read VMs but not open their console.
func TestUserRolesOnTheAPIServer(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ctx := testenv.Context(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	// A release of its own: the stack may be shared with an installed module, whose roles are
	// the same rules under other names.
	manifest, err := helm(t, "template", "rbac-"+ns, chartDir(t), "--namespace", ns, "--show-only", userRolesFile)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, manifest)
	}
	if out, err := testenv.KubectlInput(t, env.Kubeconfig, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := testenv.KubectlInput(t, env.Kubeconfig, manifest, "delete", "--ignore-not-found", "-f", "-"); err != nil {
			t.Errorf("kubectl delete: %v\n%s", err, out)
		}
	})
	for user, stock := range map[string]string{"alice": "edit", "bob": "view"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-" + stock},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: stock},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		user, namespace, group, resource, sub, verb string
		want                                        bool
	}{
		{"alice", ns, subresourceGroup, "virtualmachines", "console", "get", true},
		{"alice", ns, subresourceGroup, "virtualmachines", "vnc", "get", true},
		{"alice", ns, subresourceGroup, "virtualmachines", "portforward", "get", true},
		{"alice", ns, subresourceGroup, "virtualmachines", "addvolume", "update", true},
		{"alice", ns, subresourceGroup, "virtualmachines", "freeze", "update", false},
		{"alice", ns, friendlyGroup, "virtualmachineoperations", "", "create", true},
		{"alice", ns, friendlyGroup, "virtualmachines", "", "delete", true},
		{"alice", other, subresourceGroup, "virtualmachines", "console", "get", false},
		{"alice", ns, "subresources.kubevirt.io", "virtualmachineinstances", "console", "get", false},
		{"alice", ns, "internal.virtualization.deckhouse.io", "internalvirtualizationvirtualmachines", "", "get", false},
		{"bob", ns, friendlyGroup, "virtualmachines", "", "list", true},
		{"bob", ns, subresourceGroup, "virtualmachines", "console", "get", false},
		{"bob", ns, friendlyGroup, "virtualmachineoperations", "", "create", false},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s %s %s/%s in %s", c.user, c.verb, c.resource, c.sub, c.namespace)
		// The aggregation controller copies the rules into the stock roles shortly after the apply.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: c.user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: c.namespace, Group: c.group, Resource: c.resource, Subresource: c.sub, Verb: c.verb, Name: "vm",
				},
			}}
			got, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Allowed == c.want, nil
		})
		if err != nil {
			t.Errorf("%s: want allowed=%v: %v", name, c.want, err)
		}
	}
}
