package virtoperator

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// allowed says whether rules grant verb on group/resource.
func allowed(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func TestRBAC(t *testing.T) {
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	tests := []struct {
		role    string
		must    []access
		mustNot []access
	}{
		{role: ControllerServiceAccount,
			must: []access{
				{"kubevirt.io", "virtualmachines", "watch"}, {"kubevirt.io", "virtualmachines", "patch"},
				{"kubevirt.io", "virtualmachines/status", "update"}, {"kubevirt.io", "virtualmachineinstances", "create"},
				{"kubevirt.io", "virtualmachineinstances", "update"}, {"kubevirt.io", "virtualmachineinstances", "delete"},
				{"kubevirt.io", "virtualmachineinstancereplicasets/status", "update"},
				{"kubevirt.io", "virtualmachineinstancemigrations/status", "update"}, {"kubevirt.io", "virtualmachineinstancemigrations", "patch"},
				{"", "pods", "create"}, {"", "pods", "delete"}, {"", "pods", "watch"}, {"", "pods", "patch"}, {"", "nodes", "patch"},
				{"", "persistentvolumeclaims", "get"},
			},
			mustNot: []access{{"", "secrets", "get"}, {"kubevirt.io", "kubevirts", "update"}, {"", "nodes", "delete"},
				{"", "persistentvolumeclaims", "update"}},
		},
		{role: HandlerServiceAccount,
			must: []access{
				{"kubevirt.io", "virtualmachineinstances", "watch"}, {"kubevirt.io", "virtualmachineinstances", "update"},
				{"", "pods", "list"}, {"", "pods/status", "patch"}, {"", "nodes", "patch"}, {"", "nodes", "get"},
			},
			mustNot: []access{{"kubevirt.io", "virtualmachineinstances", "delete"}, {"", "pods", "create"}, {"", "secrets", "get"}},
		},
		{role: APIServiceAccount,
			must: []access{
				{"kubevirt.io", "virtualmachines", "patch"}, {"kubevirt.io", "virtualmachines/status", "patch"},
				{"kubevirt.io", "virtualmachineinstances", "get"}, {"kubevirt.io", "virtualmachineinstancepresets", "list"},
				{"", "pods", "list"}, {"", "pods", "delete"}, {"authorization.k8s.io", "subjectaccessreviews", "create"},
			},
			mustNot: []access{{"kubevirt.io", "virtualmachines", "delete"}, {"", "pods", "create"}},
		},
		{role: "kubevirt.io:edit",
			must: []access{
				{"kubevirt.io", "virtualmachines", "create"}, {"subresources.kubevirt.io", "virtualmachines/start", "update"},
				{"subresources.kubevirt.io", "virtualmachineinstances/console", "get"}, {"subresources.kubevirt.io", "virtualmachineinstances/pause", "update"},
			},
		},
		{role: "kubevirt.io:view",
			must:    []access{{"kubevirt.io", "virtualmachines", "list"}, {"subresources.kubevirt.io", "virtualmachineinstances/guestosinfo", "get"}},
			mustNot: []access{{"kubevirt.io", "virtualmachines", "create"}, {"subresources.kubevirt.io", "virtualmachineinstances/console", "get"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			role := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", tt.role)
			for _, r := range role.Rules {
				// One group per rule: the rewriter renames a rule's resources by its groups.
				if len(r.APIGroups) != 1 {
					t.Errorf("rule %+v names %d groups", r, len(r.APIGroups))
				}
				if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") {
					t.Errorf("wildcard rule %+v", r)
				}
			}
			for _, a := range tt.must {
				if !allowed(role.Rules, a.group, a.resource, a.verb) {
					t.Errorf("%s cannot %s %s in %q", tt.role, a.verb, a.resource, a.group)
				}
			}
			for _, a := range tt.mustNot {
				if allowed(role.Rules, a.group, a.resource, a.verb) {
					t.Errorf("%s may %s %s in %q", tt.role, a.verb, a.resource, a.group)
				}
			}
		})
	}
	for _, agg := range []string{"admin", "edit", "view"} {
		role := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", "kubevirt.io:"+agg)
		if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+agg] != "true" {
			t.Errorf("kubevirt.io:%s labels %v", agg, role.Labels)
		}
	}
	// Every authenticated user reads virt-api's version and guestfs, as KubeVirt's default role.
	def := get[*rbacv1.ClusterRoleBinding](t, ix, "ClusterRoleBinding", "", DefaultRole)
	if len(def.Subjects) != 1 || def.Subjects[0].Kind != rbacv1.GroupKind || def.Subjects[0].Name != "system:authenticated" {
		t.Errorf("%s subjects %+v", DefaultRole, def.Subjects)
	}
	defRole := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", DefaultRole)
	for _, res := range []string{"version", "guestfs"} {
		if !allowed(defRole.Rules, "subresources.kubevirt.io", res, "get") {
			t.Errorf("%s cannot get %s", DefaultRole, res)
		}
	}
	if allowed(defRole.Rules, "subresources.kubevirt.io", "virtualmachines/start", "update") {
		t.Errorf("%s may start VMs", DefaultRole)
	}
	// Every binding names a role that exists (or a built-in one) and an account Objects makes.
	for _, o := range ix {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", b.RoleRef.Name)
			if b.Name == DefaultRole {
				continue
			}
			get[*corev1.ServiceAccount](t, ix, "ServiceAccount", b.Subjects[0].Namespace, b.Subjects[0].Name)
		case *rbacv1.RoleBinding:
			if b.RoleRef.Name != "extension-apiserver-authentication-reader" {
				get[*rbacv1.Role](t, ix, "Role", b.Namespace, b.RoleRef.Name)
			}
			get[*corev1.ServiceAccount](t, ix, "ServiceAccount", b.Subjects[0].Namespace, b.Subjects[0].Name)
		}
	}
	ns := get[*rbacv1.Role](t, ix, "Role", "kv-ns", ControllerServiceAccount)
	if !allowed(ns.Rules, "coordination.k8s.io", "leases", "update") {
		t.Error("virt-controller cannot hold its leader lease")
	}
}

func TestOperatorRules(t *testing.T) {
	op := OperatorRules()
	// It may apply, list, watch and delete every kind it makes.
	gvr := map[string]access{
		"ValidatingWebhookConfiguration": {"admissionregistration.k8s.io", "validatingwebhookconfigurations", ""},
		"MutatingWebhookConfiguration":   {"admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""},
		"APIService":                     {"apiregistration.k8s.io", "apiservices", ""},
		"DaemonSet":                      {"apps", "daemonsets", ""}, "Deployment": {"apps", "deployments", ""},
		"Service": {"", "services", ""}, "ServiceAccount": {"", "serviceaccounts", ""},
		"Secret": {"", "secrets", ""}, "ConfigMap": {"", "configmaps", ""},
		"ClusterRoleBinding": {"rbac.authorization.k8s.io", "clusterrolebindings", ""}, "RoleBinding": {"rbac.authorization.k8s.io", "rolebindings", ""},
		"ClusterRole": {"rbac.authorization.k8s.io", "clusterroles", ""}, "Role": {"rbac.authorization.k8s.io", "roles", ""},
	}
	for _, k := range managedKinds {
		a, ok := gvr[k.kind]
		if !ok {
			t.Errorf("no resource known for %s", k.kind)
			continue
		}
		for _, verb := range []string{"get", "list", "watch", "create", "patch", "delete"} {
			if !allowed(op, a.group, a.resource, verb) {
				t.Errorf("operator cannot %s %s", verb, a.resource)
			}
		}
	}
	// It holds every permission it grants, so the apiserver lets it grant them.
	for _, o := range Objects(testKV(), testConfig(), testCerts) {
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules = r.Rules
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if !allowed(op, g, res, v) {
							t.Errorf("%s grants %s %s/%s, which the operator does not hold", o.GetName(), v, g, res)
						}
					}
				}
			}
		}
	}
	for _, a := range []access{{"kubevirt.io", "kubevirts/status", "patch"}, {"kubevirt.io", "kubevirts/finalizers", "update"}, {"coordination.k8s.io", "leases", "update"}} {
		if !allowed(op, a.group, a.resource, a.verb) {
			t.Errorf("operator cannot %s %s", a.verb, a.resource)
		}
	}
}
