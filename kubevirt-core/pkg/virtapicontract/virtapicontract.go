// Package virtapicontract names what virt-api serves and what it expects of its peers: the
// aggregated API's group and version, the admission webhooks' paths, and the name on
// virt-handler's serving certificate. virt-api serves and verifies them; virt-operator registers
// them (APIService, webhook configurations, RBAC) and issues the certificate. The values are
// KubeVirt's, so that configurations and clients written for upstream work here.
package virtapicontract

// The aggregated API's group and version.
const (
	SubresourcesGroup   = "subresources.kubevirt.io"
	SubresourcesVersion = "v1"
)

// KubeVirt's admission webhook paths.
const (
	PathVMICreate = "/virtualmachineinstances-validate-create"
	PathVMIUpdate = "/virtualmachineinstances-validate-update"
	PathVM        = "/virtualmachines-validate"
	PathVMIRS     = "/virtualmachinereplicaset-validate"
	PathMigration = "/migration-validate-create"
	PathPreset    = "/vmipreset-validate"
	PathVMIMutate = "/virtualmachineinstances-mutate"
	PathVMMutate  = "/virtualmachines-mutate"
)

// WebhookPaths are all the webhook paths virt-api answers.
var WebhookPaths = []string{PathVMICreate, PathVMIUpdate, PathVM, PathVMIRS, PathMigration, PathPreset, PathVMIMutate, PathVMMutate}

// The core's ServiceAccounts, KubeVirt's names. virt-operator runs the components under them;
// virt-api lets only them change a VMI's spec after creation (SystemUsers), as KubeVirt does:
// everyone else goes through the subresources.
const (
	APIServiceAccount        = "kubevirt-apiserver"
	ControllerServiceAccount = "kubevirt-controller"
	HandlerServiceAccount    = "kubevirt-handler"
)

// SystemUsers are the user names of the core's ServiceAccounts in its namespace.
func SystemUsers(namespace string) map[string]bool {
	users := map[string]bool{}
	for _, sa := range []string{ControllerServiceAccount, HandlerServiceAccount, APIServiceAccount} {
		users["system:serviceaccount:"+namespace+":"+sa] = true
	}
	return users
}

// HandlerServerName is the name virt-handler's serving certificate carries. Handler Pods come and
// go with their IPs, so virt-api verifies the name, not the address.
const HandlerServerName = "virt-handler"

// SubresourcesVersions are the versions virt-api serves, with the same routes, as KubeVirt's:
// the preferred one first.
var SubresourcesVersions = []string{SubresourcesVersion, "v1alpha3"}

// KubeVirtSubresources are the subresources KubeVirt's virt-api has, by resource, whether the core
// serves them or not: the first path element below the object (sev stands for sev/fetchcertchain
// and the other SEV routes). virt-api answers the ones it does not serve with a Status saying so,
// and its metrics name only these.
var KubeVirtSubresources = map[string][]string{
	"virtualmachines": {"start", "stop", "restart", "migrate", "addvolume", "removevolume", "portforward",
		"expand-spec", "memorydump", "removememorydump", "evacuatecancel", "objectgraph"},
	"virtualmachineinstances": {"pause", "unpause", "freeze", "unfreeze", "softreboot", "reset",
		"guestosinfo", "userlist", "filesystemlist", "console", "vnc", "portforward", "addvolume",
		"removevolume", "sev", "usbredir", "vsock", "evacuatecancel", "objectgraph"},
}

// KubeVirtGroupRoutes are KubeVirt's routes below the group version that are not about one object
// (besides version, guestfs and healthz, which virt-api serves): namespaces/{ns}/expand-vm-spec and
// the cluster profiler.
var KubeVirtGroupRoutes = []string{"expand-vm-spec", "start-cluster-profiler", "stop-cluster-profiler", "dump-cluster-profiler"}
