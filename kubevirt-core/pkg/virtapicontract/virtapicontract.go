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

// HandlerServerName is the name virt-handler's serving certificate carries. Handler Pods come and
// go with their IPs, so virt-api verifies the name, not the address.
const HandlerServerName = "virt-handler"
