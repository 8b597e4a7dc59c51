package virtoperator

import (
	rbacv1 "k8s.io/api/rbac/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// The rules are written in kubevirt.io terms, one API group per rule: the rewriter renames the
// group and the resources of a rule by the rule's groups, and one group per rule keeps that
// unambiguous. They list what the components' code calls, nothing more: see the Reconcilers and
// servers named in each comment.

var (
	core        = ""
	kubevirt    = kubevirtv1.GroupVersion.Group
	subres      = virtapicontract.SubresourcesGroup
	read        = []string{"get", "list", "watch"}
	readWrite   = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	updateOnly  = []string{"update"}
	statusWrite = []string{"update", "patch"}
)

func rule(group string, verbs []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// ControllerRules are virt-controller's cluster-wide permissions.
func ControllerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// vm: reads VMs, patches their finalizers and state change requests, writes status.
		rule(kubevirt, []string{"get", "list", "watch", "patch"}, "virtualmachines"),
		rule(kubevirt, statusWrite, "virtualmachines/status"),
		// vm, replicaset: create, update and delete VMIs; node: fail the VMIs of dead nodes;
		// vmi: its phases (the VMI has no status subresource).
		rule(kubevirt, []string{"get", "list", "watch", "create", "update", "patch", "delete"}, "virtualmachineinstances"),
		rule(kubevirt, read, "virtualmachineinstancereplicasets"),
		rule(kubevirt, statusWrite, "virtualmachineinstancereplicasets/status"),
		rule(kubevirt, []string{"get", "list", "watch", "patch"}, "virtualmachineinstancemigrations"),
		rule(kubevirt, statusWrite, "virtualmachineinstancemigrations/status"),
		// Owner references that block deletion need this where the apiserver enforces them.
		rule(kubevirt, updateOnly, "virtualmachines/finalizers", "virtualmachineinstances/finalizers",
			"virtualmachineinstancereplicasets/finalizers", "virtualmachineinstancemigrations/finalizers"),
		// vmi, migration: launcher pods (a migration's source gets its network priority label);
		// node: the launchers left on a node.
		rule(core, []string{"get", "list", "watch", "create", "patch", "delete"}, "pods"),
		// vmi: the claims of a VMI's volumes, read once before its Pod is made.
		rule(core, []string{"get"}, "persistentvolumeclaims"),
		// node: heartbeats, and kubevirt.io/schedulable=false on unresponsive nodes.
		rule(core, []string{"get", "list", "watch", "patch"}, "nodes"),
		// vm, vmi: KubeVirt's events about the VMs and VMIs, in their namespaces; leader election's
		// in its own.
		rule(core, []string{"create", "patch"}, "events"),
		rule("events.k8s.io", []string{"create", "patch"}, "events"),
		// metrics: the pod's kube-rbac-proxies review each scrape's token and access.
		rule("authentication.k8s.io", []string{"create"}, "tokenreviews"),
		rule("authorization.k8s.io", []string{"create"}, "subjectaccessreviews"),
	}
}

// ControllerNamespaceRules are virt-controller's permissions in its own namespace: leader
// election.
func ControllerNamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule("coordination.k8s.io", []string{"get", "create", "update"}, "leases"),
	}
}

// HandlerRules are virt-handler's cluster-wide permissions.
func HandlerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// vmisync: the VMIs on its node (by label), their status; rest: the VMI of a command.
		rule(kubevirt, []string{"get", "list", "watch", "update"}, "virtualmachineinstances"),
		// vmisync: the launcher pods on its node and their readiness gate; rest: a VMI's launcher.
		rule(core, read, "pods"),
		rule(core, []string{"patch"}, "pods/status"),
		// heartbeat: the node's annotation and schedulable label; node labeller: its labels,
		// watched for drift.
		rule(core, []string{"get", "watch", "patch"}, "nodes"),
		// hotplug: where a hotplugged claim's volume is on the node.
		rule(core, []string{"get"}, "persistentvolumeclaims", "persistentvolumes"),
		// vmisync: KubeVirt's events about the VMIs, in their namespaces.
		rule(core, []string{"create", "patch"}, "events"),
		rule("events.k8s.io", []string{"create", "patch"}, "events"),
		// metrics: the pod's kube-rbac-proxies review each scrape's token and access.
		rule("authentication.k8s.io", []string{"create"}, "tokenreviews"),
		rule("authorization.k8s.io", []string{"create"}, "subjectaccessreviews"),
	}
}

// APIRules are virt-api's cluster-wide permissions.
func APIRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// subresources: start, stop and restart patch the VM's run strategy or its state change
		// requests.
		rule(kubevirt, []string{"get", "patch"}, "virtualmachines"),
		rule(kubevirt, []string{"patch"}, "virtualmachines/status"),
		// subresources: addvolume and removevolume of a VMI patch its volumes.
		rule(kubevirt, []string{"get", "patch"}, "virtualmachineinstances"),
		// webhooks: the VMI mutator applies presets.
		rule(kubevirt, []string{"list"}, "virtualmachineinstancepresets"),
		// subresources: a forced restart deletes the launcher; the node proxy finds the handlers.
		rule(core, []string{"list", "delete"}, "pods"),
		// subresources: every call is authorized for the user the front proxy forwarded; metrics:
		// the pod's kube-rbac-proxies review each scrape's token and access.
		rule("authentication.k8s.io", []string{"create"}, "tokenreviews"),
		rule("authorization.k8s.io", []string{"create"}, "subjectaccessreviews"),
	}
}

// vmResources are the kinds users manage.
var vmResources = []string{
	"virtualmachines", "virtualmachineinstances", "virtualmachineinstancepresets",
	"virtualmachineinstancereplicasets", "virtualmachineinstancemigrations",
}

// userViewRules let a user read VMs and what their guests report.
func userViewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(kubevirt, read, vmResources...),
		rule(subres, []string{"get"}, "virtualmachineinstances/guestosinfo", "virtualmachineinstances/filesystemlist",
			"virtualmachineinstances/userlist"),
	}
}

// userEditRules let a user run VMs: everything of view, the kinds themselves, and the commands
// and streams of virt-api (KubeVirt's list, so that roles stay right as virt-api grows).
func userEditRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(kubevirt, readWrite, vmResources...),
		rule(subres, []string{"get"}, "virtualmachineinstances/guestosinfo", "virtualmachineinstances/filesystemlist",
			"virtualmachineinstances/userlist", "virtualmachineinstances/console", "virtualmachineinstances/vnc",
			"virtualmachineinstances/vnc/screenshot", "virtualmachineinstances/portforward", "virtualmachines/portforward"),
		rule(subres, updateOnly, "virtualmachineinstances/pause", "virtualmachineinstances/unpause",
			"virtualmachineinstances/addvolume", "virtualmachineinstances/removevolume", "virtualmachineinstances/freeze",
			"virtualmachineinstances/unfreeze", "virtualmachineinstances/softreboot", "virtualmachineinstances/reset"),
		rule(subres, updateOnly, "virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart",
			"virtualmachines/addvolume", "virtualmachines/removevolume", "virtualmachines/migrate", "virtualmachines/memorydump"),
		rule(subres, updateOnly, "expand-vm-spec"),
	}
}

// UserRoles are KubeVirt's user-facing roles, aggregated into the cluster's admin, edit and view.
func (in Install) UserRoles() []client.Object {
	role := func(name, aggregateTo string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
		r := &rbacv1.ClusterRole{ObjectMeta: in.clusterMeta(name, ""), Rules: rules}
		r.Labels["rbac.authorization.k8s.io/aggregate-to-"+aggregateTo] = "true"
		return r
	}
	return []client.Object{
		role("kubevirt.io:admin", "admin", userEditRules()),
		role("kubevirt.io:edit", "edit", userEditRules()),
		role("kubevirt.io:view", "view", userViewRules()),
		&rbacv1.ClusterRole{ObjectMeta: in.clusterMeta(DefaultRole, ""), Rules: defaultRules()},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: in.clusterMeta(DefaultRole, ""),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: DefaultRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
		},
	}
}

// defaultRules are KubeVirt's kubevirt.io:default: virt-api's version and guestfs.
func defaultRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{rule(subres, []string{"get", "list"}, "version", "guestfs")}
}

// clusterBinding is a ClusterRole of the same name as the account, bound to it.
func (in Install) clusterBinding(account string, rules []rbacv1.PolicyRule) []client.Object {
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: in.clusterMeta(account, ""), Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: in.clusterMeta(account, ""),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: account},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: in.Namespace}},
		},
	}
}

func (in Install) controllerRBAC() []client.Object {
	out := in.clusterBinding(ControllerServiceAccount, ControllerRules())
	return append(out,
		&rbacv1.Role{ObjectMeta: in.meta(ControllerServiceAccount, ""), Rules: ControllerNamespaceRules()},
		&rbacv1.RoleBinding{
			ObjectMeta: in.meta(ControllerServiceAccount, ""),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ControllerServiceAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ControllerServiceAccount, Namespace: in.Namespace}},
		},
	)
}

func (in Install) handlerRBAC() []client.Object {
	return in.clusterBinding(HandlerServiceAccount, HandlerRules())
}

// APIAuthReaderBinding is the RoleBinding that lets virt-api read the front proxy's CA from
// kube-system, as every aggregated API server does.
const APIAuthReaderBinding = "kubevirt-apiserver-auth-reader"

func (in Install) apiRBAC() []client.Object {
	out := in.clusterBinding(APIServiceAccount, APIRules())
	// Another namespace: nothing can own it, the finalizer removes it with the cluster objects.
	m := in.clusterMeta(APIAuthReaderBinding, "")
	m.Namespace = "kube-system"
	return append(out, &rbacv1.RoleBinding{
		ObjectMeta: m,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: APIServiceAccount, Namespace: in.Namespace}},
	})
}

// metricsReaderRules are what a scraper needs of the kube-rbac-proxies in front of the metrics:
// their default authorization is a non-resource check of the request's verb and path.
func metricsReaderRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{NonResourceURLs: []string{MetricsPath}, Verbs: []string{"get"}}}
}

// MetricsReader is the ClusterRole that lets a scraper's account read every metrics port of the
// installation (the chart binds its Prometheus to it). The name says whose it is, so that it never
// meets a stock KubeVirt's roles.
func (in Install) MetricsReader() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: in.clusterMeta(MetricsReaderRole, ""), Rules: metricsReaderRules()}
}

// OperatorRules are what virt-operator itself needs, for whatever installs it (the chart): its
// KubeVirt resources, the kinds it makes, its leader election, and every permission it grants.
// The apiserver lets it create a role or binding only with the permissions inside (RBAC's
// escalation check); holding them is narrower than the escalate and bind verbs.
func OperatorRules() []rbacv1.PolicyRule {
	manage := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	out := []rbacv1.PolicyRule{
		rule(kubevirt, []string{"get", "list", "watch", "update", "patch"}, "kubevirts"),
		rule(kubevirt, statusWrite, "kubevirts/status"),
		// Owner references that block the KubeVirt's deletion.
		rule(kubevirt, updateOnly, "kubevirts/finalizers"),
		rule(core, manage, "serviceaccounts", "configmaps", "secrets", "services"),
		rule("apps", manage, "deployments", "daemonsets"),
		rule(rbacv1.GroupName, manage, "clusterroles", "clusterrolebindings", "roles", "rolebindings"),
		rule("admissionregistration.k8s.io", manage, "validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
		rule("apiregistration.k8s.io", manage, "apiservices"),
		rule("coordination.k8s.io", []string{"get", "create", "update"}, "leases"),
		rule(core, []string{"create", "patch"}, "events"),
		rule("events.k8s.io", []string{"create", "patch"}, "events"),
	}
	for _, granted := range [][]rbacv1.PolicyRule{
		ControllerRules(), ControllerNamespaceRules(), HandlerRules(), APIRules(), userEditRules(), userViewRules(),
		defaultRules(), metricsReaderRules(),
	} {
		out = append(out, granted...)
	}
	return out
}
