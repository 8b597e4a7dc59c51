package rewrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

var rw = New(rules.Default())

const (
	IG = "internal.virtualization.deckhouse.io"
	IK = "kubevirt.internal.virtualization.deckhouse.io"
)

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("invalid JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

var placeholder = regexp.MustCompile(`\bI[GK]\b`)

// r expands the placeholders IG (renamed group) and IK (renamed key prefix).
func r(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		if m == "IG" {
			return IG
		}
		return IK
	})
}

type vector struct {
	name      string
	component string // component view
	cluster   string // cluster view
	target    Target // component-view target
	oneWay    Direction
	onlyOne   bool
}

func clusterTarget(t Target) Target {
	if g, ok := rw.rules.Group(Rename, t.Group); ok {
		k, _ := rw.rules.Kind(Rename, t.Group, t.Kind)
		return Target{Group: g, Kind: k}
	}
	return t
}

func runVectors(t *testing.T, vs []vector, fn func(d Direction, body []byte, t Target) ([]byte, error)) {
	t.Helper()
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			comp, clus := []byte(r(v.component)), []byte(r(v.cluster))
			if !v.onlyOne || v.oneWay == Rename {
				got, err := fn(Rename, comp, v.target)
				if err != nil {
					t.Fatalf("rename: %v", err)
				}
				if !jsonEqual(t, got, clus) {
					t.Errorf("rename:\n got %s\nwant %s\n%s", got, clus, mustDiff(got, clus))
				}
			}
			if !v.onlyOne || v.oneWay == Restore {
				got, err := fn(Restore, clus, clusterTarget(v.target))
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				if !jsonEqual(t, got, comp) {
					t.Errorf("restore:\n got %s\nwant %s\n%s", got, comp, mustDiff(got, comp))
				}
			}
		})
	}
}

func mustDiff(a, b []byte) string {
	cs, err := Diff(a, b, 20)
	if err != nil {
		return err.Error()
	}
	return FormatDiff(cs)
}

func TestObjects(t *testing.T) {
	runVectors(t, []vector{
		{name: "vm", component: `{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","metadata":{"name":"x","namespace":"ns",
			"labels":{"kubevirt.io":"virt-launcher","kubevirt.io/foo":"bar","vm.kubevirt.io/name":"x","operator.kubevirt.io/x":"","prometheus.kubevirt.io":"true","cpu-model.node.kubevirt.io/Haswell":"true","app.kubernetes.io/managed-by":"virt-operator","other":"kubevirt.io"},
			"annotations":{"kubevirt.io/latest-observed-api-version":"v1","note":"kubevirt.io/foo"},
			"finalizers":["kubevirt.io/virtualMachineControllerFinalize","foregroundDeleteVirtualMachine"],
			"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"o","uid":"1"},{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","name":"front","uid":"2"}],
			"managedFields":[{"manager":"m","apiVersion":"kubevirt.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
			"spec":{"running":true,"template":{"metadata":{"labels":{"kubevirt.io/keep":"as-is"}}}}}`,
			cluster: `{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","metadata":{"name":"x","namespace":"ns",
			"labels":{"IK":"virt-launcher","IK/foo":"bar","vm.IK/name":"x","operator.IK/x":"","prometheus.IK":"true","cpu-model.node.virtualization.deckhouse.io/Haswell":"true","app.kubernetes.io/managed-by":"virt-operator-internal-virtualization","other":"kubevirt.io"},
			"annotations":{"IK/latest-observed-api-version":"v1","note":"kubevirt.io/foo"},
			"finalizers":["IK/virtualMachineControllerFinalize","foregroundDeleteVirtualMachine"],
			"ownerReferences":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","name":"o","uid":"1"},{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","name":"front","uid":"2"}],
			"managedFields":[{"manager":"m","apiVersion":"IG/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},
			"spec":{"running":true,"template":{"metadata":{"labels":{"kubevirt.io/keep":"as-is"}}}}}`},
		{name: "friendly VM untouched", component: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"name":"a"}}`,
			cluster: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"name":"a"}}`},
		// The friendly group is passed through by the rules: a user's kubevirt.io keys on it are
		// the user's, in both directions, whatever the order of the fields.
		{name: "friendly VM metadata untouched", component: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"name":"a","labels":{"kubevirt.io/foo":"1","IK/bar":"2"},"annotations":{"kubevirt.io/x":""},"finalizers":["kubevirt.io/f"],"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"o"}]}}`,
			cluster: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"name":"a","labels":{"kubevirt.io/foo":"1","IK/bar":"2"},"annotations":{"kubevirt.io/x":""},"finalizers":["kubevirt.io/f"],"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"o"}]}}`},
		{name: "friendly VM, apiVersion last", component: `{"metadata":{"labels":{"kubevirt.io/foo":"1"}},"kind":"VirtualMachine","apiVersion":"virtualization.deckhouse.io/v1alpha2"}`,
			cluster: `{"metadata":{"labels":{"kubevirt.io/foo":"1"}},"kind":"VirtualMachine","apiVersion":"virtualization.deckhouse.io/v1alpha2"}`},
		{name: "friendly list", component: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachineList","items":[{"metadata":{"labels":{"kubevirt.io/foo":"1"}}},{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"labels":{"IK/foo":"1"}}}]}`,
			cluster: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachineList","items":[{"metadata":{"labels":{"kubevirt.io/foo":"1"}}},{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"labels":{"IK/foo":"1"}}}]}`},
		{name: "friendly object inside a v1 List", component: `{"kind":"List","apiVersion":"v1","items":[{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"kubevirt.io":"virt-launcher"}}},{"metadata":{"labels":{"kubevirt.io/u":"x"}},"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualDisk"}]}`,
			cluster: `{"kind":"List","apiVersion":"v1","items":[{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"IK":"virt-launcher"}}},{"metadata":{"labels":{"kubevirt.io/u":"x"}},"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualDisk"}]}`},
		{name: "managedFields fieldsV1 keys", component: `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:kubevirt.io":{},"f:kubevirt.io/created-by":{},"f:app":{}},"f:annotations":{"f:vm.kubevirt.io/flavor":{}},"f:finalizers":{".":{},"v:\"kubevirt.io/f\"":{},"v:\"other\"":{}},"f:ownerReferences":{"k:{\"uid\":\"1\"}":{}}},"f:spec":{"f:nodeSelector":{"f:cpu-model.node.kubevirt.io/Haswell":{}},"f:affinity":{"f:podAffinity":{}},"f:containers":{"k:{\"name\":\"kubevirt.io\"}":{"f:name":{}}}}}}]}}`,
			cluster: `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:IK":{},"f:IK/created-by":{},"f:app":{}},"f:annotations":{"f:vm.IK/flavor":{}},"f:finalizers":{".":{},"v:\"IK/f\"":{},"v:\"other\"":{}},"f:ownerReferences":{"k:{\"uid\":\"1\"}":{}}},"f:spec":{"f:nodeSelector":{"f:cpu-model.node.virtualization.deckhouse.io/Haswell":{}},"f:affinity":{"f:podAffinity":{}},"f:containers":{"k:{\"name\":\"kubevirt.io\"}":{"f:name":{}}}}}}]}}`},
		{name: "managedFields of a deployment template, preserved originals", component: `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"managedFields":[{"manager":"m","apiVersion":"apps/v1","fieldsV1":{"f:spec":{"f:selector":{"f:matchLabels":{"f:kubevirt.io":{}}},"f:template":{"f:metadata":{"f:labels":{"f:preserved-original-kubevirt.io/x":{}}}}}}},{"manager":"n","fieldsV1":null}]}}`,
			cluster: `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"managedFields":[{"manager":"m","apiVersion":"apps/v1","fieldsV1":{"f:spec":{"f:selector":{"f:matchLabels":{"f:IK":{}}},"f:template":{"f:metadata":{"f:labels":{"f:kubevirt.io/x":{}}}}}}},{"manager":"n","fieldsV1":null}]}}`},
		{name: "sorted keys", component: `{"apiVersion":"snapshot.kubevirt.io/v1beta1","kind":"VirtualMachineSnapshot","metadata":{}}`,
			cluster: `{"apiVersion":"snapshot.IG/v1beta1","kind":"InternalVirtualizationVirtualMachineSnapshot","metadata":{}}`},
		{name: "nulls stay null", component: `{"kind":"VirtualMachineInstance","apiVersion":"kubevirt.io/v1","metadata":{"labels":null,"annotations":null,"finalizers":null,"ownerReferences":null,"managedFields":null}}`,
			cluster: `{"kind":"InternalVirtualizationVirtualMachineInstance","apiVersion":"IG/v1","metadata":{"labels":null,"annotations":null,"finalizers":null,"ownerReferences":null,"managedFields":null}}`},
		{name: "preserved original keys", component: `{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"preserved-original-kubevirt.io":"virt-launcher","preserved-original-kubevirt.io/created-by":"u","kubevirt.io/created-by":"mine","preserved-original-preserved-original-kubevirt.io/x":"y","app.kubernetes.io/managed-by":"preserved-original-virt-operator"},"finalizers":["preserved-original-kubevirt.io/f"],
			"ownerReferences":[{"apiVersion":"preserved-original-kubevirt.io/v1","kind":"VirtualMachineInstance","name":"stock"}]}}`,
			cluster: `{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"kubevirt.io":"virt-launcher","kubevirt.io/created-by":"u","IK/created-by":"mine","preserved-original-kubevirt.io/x":"y","app.kubernetes.io/managed-by":"virt-operator"},"finalizers":["kubevirt.io/f"],
			"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"stock"}]}}`},
		{name: "list of VMs (CR list, sorted)", component: `{"apiVersion":"kubevirt.io/v1","items":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"a","labels":{"kubevirt.io/x":"1"}}}],"kind":"VirtualMachineList","metadata":{"resourceVersion":"1"}}`,
			cluster: `{"apiVersion":"IG/v1","items":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"a","labels":{"IK/x":"1"}}}],"kind":"InternalVirtualizationVirtualMachineList","metadata":{"resourceVersion":"1"}}`},
		{name: "mixed v1 List", component: `{"kind":"List","apiVersion":"v1","items":[{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"kubevirt.io":"virt-launcher"}}},{"kind":"VirtualMachineInstance","apiVersion":"kubevirt.io/v1","metadata":{}}]}`,
			cluster: `{"kind":"List","apiVersion":"v1","items":[{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"IK":"virt-launcher"}}},{"kind":"InternalVirtualizationVirtualMachineInstance","apiVersion":"IG/v1","metadata":{}}]}`},
		{name: "pod", component: `{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"kubevirt.io":"virt-launcher"}},"spec":{"nodeSelector":{"kubevirt.io/schedulable":"true","cpu-feature.node.kubevirt.io/avx":"true"},
			"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"cpu-model.node.kubevirt.io/Haswell","operator":"In","values":["true"]}]}]},
			"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"kubevirt.io/x","operator":"Exists"}]}}]},
			"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"kubevirt.io/created-by":"u"},"matchExpressions":[{"key":"app.kubernetes.io/managed-by","operator":"In","values":["virt-operator","x"]}]},"topologyKey":"kubernetes.io/hostname"}]}}}}`,
			cluster: `{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"IK":"virt-launcher"}},"spec":{"nodeSelector":{"IK/schedulable":"true","cpu-feature.node.virtualization.deckhouse.io/avx":"true"},
			"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"cpu-model.node.virtualization.deckhouse.io/Haswell","operator":"In","values":["true"]}]}]},
			"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"IK/x","operator":"Exists"}]}}]},
			"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"IK/created-by":"u"},"matchExpressions":[{"key":"app.kubernetes.io/managed-by","operator":"In","values":["virt-operator-internal-virtualization","x"]}]},"topologyKey":"kubernetes.io/hostname"}]}}}}`},
		{name: "deployment", component: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"kubevirt.io":"virt-api"}},"spec":{"selector":{"matchLabels":{"kubevirt.io":"virt-api"}},"template":{"metadata":{"labels":{"kubevirt.io":"virt-api","prometheus.kubevirt.io":"true"}},"spec":{"nodeSelector":{"kubevirt.io/x":"y"}}}}}`,
			cluster: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"IK":"virt-api"}},"spec":{"selector":{"matchLabels":{"IK":"virt-api"}},"template":{"metadata":{"labels":{"IK":"virt-api","prometheus.IK":"true"}},"spec":{"nodeSelector":{"IK/x":"y"}}}}}`},
		{name: "daemonset list (native, items without kind)", component: `{"kind":"DaemonSetList","apiVersion":"apps/v1","metadata":{},"items":[{"metadata":{"name":"virt-handler"},"spec":{"selector":{"matchLabels":{"kubevirt.io":"virt-handler"}},"template":{"metadata":{"labels":{"kubevirt.io":"virt-handler"}}}}}]}`,
			cluster: `{"kind":"DaemonSetList","apiVersion":"apps/v1","metadata":{},"items":[{"metadata":{"name":"virt-handler"},"spec":{"selector":{"matchLabels":{"IK":"virt-handler"}},"template":{"metadata":{"labels":{"IK":"virt-handler"}}}}}]}`},
		{name: "cronjob", component: `{"apiVersion":"batch/v1","kind":"CronJob","spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"kubevirt.io":"j"}}}}}}}`,
			cluster: `{"apiVersion":"batch/v1","kind":"CronJob","spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"IK":"j"}}}}}}}`},
		{name: "service", component: `{"apiVersion":"v1","kind":"Service","spec":{"selector":{"kubevirt.io":"virt-api"},"ports":[{"port":443}]}}`,
			cluster: `{"apiVersion":"v1","kind":"Service","spec":{"selector":{"IK":"virt-api"},"ports":[{"port":443}]}}`},
		{name: "pdb", component: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":{"kubevirt.io/created-by":"u"}}}}`,
			cluster: `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","spec":{"selector":{"matchLabels":{"IK/created-by":"u"}}}}`},
		{name: "servicemonitor", component: `{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","spec":{"selector":{"matchLabels":{"prometheus.kubevirt.io":"true"}},"namespaceSelector":{"any":true}}}`,
			cluster: `{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","spec":{"selector":{"matchLabels":{"prometheus.IK":"true"}},"namespaceSelector":{"any":true}}}`},
		{name: "pvc dataSource", component: `{"apiVersion":"v1","kind":"PersistentVolumeClaim","spec":{"dataSource":{"apiGroup":"snapshot.kubevirt.io","kind":"VirtualMachineSnapshot","name":"s"},"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"v"}}}`,
			cluster: `{"apiVersion":"v1","kind":"PersistentVolumeClaim","spec":{"dataSource":{"apiGroup":"snapshot.IG","kind":"InternalVirtualizationVirtualMachineSnapshot","name":"s"},"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"v"}}}`},
		{name: "controllerrevision", component: `{"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"a"}]},"data":{"apiVersion":"instancetype.kubevirt.io/v1beta1","kind":"VirtualMachineInstancetype","metadata":{"labels":{"kubevirt.io/x":"y"}},"spec":{}},"revision":1}`,
			cluster: `{"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{"ownerReferences":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","name":"a"}]},"data":{"apiVersion":"instancetype.IG/v1beta1","kind":"InternalVirtualizationVirtualMachineInstancetype","metadata":{"labels":{"IK/x":"y"}},"spec":{}},"revision":1}`},
		{name: "core event", component: `{"apiVersion":"v1","kind":"Event","involvedObject":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"a"},"reason":"Started"}`,
			cluster: `{"apiVersion":"v1","kind":"Event","involvedObject":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachineInstance","name":"a"},"reason":"Started"}`},
		{name: "events.k8s.io event", component: `{"apiVersion":"events.k8s.io/v1","kind":"Event","regarding":{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","name":"a"},"related":{"apiVersion":"v1","kind":"Pod","name":"p"}}`,
			cluster: `{"apiVersion":"events.k8s.io/v1","kind":"Event","regarding":{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","name":"a"},"related":{"apiVersion":"v1","kind":"Pod","name":"p"}}`},
		{name: "clusterrole", component: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","rules":[{"apiGroups":["kubevirt.io"],"resources":["virtualmachines","virtualmachines/status","virtualmachineinstances"],"verbs":["get"]},{"apiGroups":["subresources.kubevirt.io"],"resources":["virtualmachines/start"],"verbs":["update"]},{"apiGroups":[""],"resources":["pods"],"verbs":["*"]},{"resources":["virtualmachines"],"apiGroups":["snapshot.kubevirt.io","kubevirt.io"],"verbs":["*"]}],
			"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"kubevirt.io/aggregate":"true"}}]}}`,
			cluster: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","rules":[{"apiGroups":["IG"],"resources":["internalvirtualizationvirtualmachines","internalvirtualizationvirtualmachines/status","internalvirtualizationvirtualmachineinstances"],"verbs":["get"]},{"apiGroups":["subresources.kubevirt.io"],"resources":["virtualmachines/start"],"verbs":["update"]},{"apiGroups":[""],"resources":["pods"],"verbs":["*"]},{"resources":["internalvirtualizationvirtualmachines"],"apiGroups":["snapshot.IG","IG"],"verbs":["*"]}],
			"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"IK/aggregate":"true"}}]}}`},
		{name: "validating webhook configuration", component: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"labels":{"kubevirt.io":""}},"webhooks":[{"name":"vm.kubevirt.io","clientConfig":{"service":{"name":"virt-api","path":"/virtualmachines-validate"}},"rules":[{"apiGroups":["kubevirt.io"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["virtualmachines"]}],"objectSelector":{"matchExpressions":[{"key":"kubevirt.io/x","operator":"DoesNotExist"}]},"namespaceSelector":{"matchLabels":{"kubevirt.io/ns":"y"}}}]}`,
			cluster: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"labels":{"IK":""}},"webhooks":[{"name":"vm.kubevirt.io","clientConfig":{"service":{"name":"virt-api","path":"/virtualmachines-validate"}},"rules":[{"apiGroups":["IG"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["internalvirtualizationvirtualmachines"]}],"objectSelector":{"matchExpressions":[{"key":"IK/x","operator":"DoesNotExist"}]},"namespaceSelector":{"matchLabels":{"IK/ns":"y"}}}]}`},
		{name: "VAP and binding", component: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","spec":{"matchConstraints":{"resourceRules":[{"apiGroups":["kubevirt.io"],"resources":["virtualmachineinstances"]}],"objectSelector":{"matchLabels":{"kubevirt.io":"x"}}},"paramKind":{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt"}}}`,
			cluster: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","spec":{"matchConstraints":{"resourceRules":[{"apiGroups":["IG"],"resources":["internalvirtualizationvirtualmachineinstances"]}],"objectSelector":{"matchLabels":{"IK":"x"}}},"paramKind":{"apiVersion":"IG/v1","kind":"InternalVirtualizationKubeVirt"}}}`},
		{name: "VAP binding", component: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding","spec":{"matchResources":{"excludeResourceRules":[{"apiGroups":["pool.kubevirt.io"],"resources":["virtualmachinepools"]}]},"paramRef":{"selector":{"matchLabels":{"kubevirt.io":"p"}}}}}`,
			cluster: `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding","spec":{"matchResources":{"excludeResourceRules":[{"apiGroups":["pool.IG"],"resources":["internalvirtualizationvirtualmachinepools"]}]},"paramRef":{"selector":{"matchLabels":{"IK":"p"}}}}}`},
		{name: "apiservice", component: `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.kubevirt.io"},"spec":{"group":"kubevirt.io","version":"v1"}}`,
			cluster: `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.IG"},"spec":{"group":"IG","version":"v1"}}`},
		{name: "subresources apiservice untouched", component: `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.subresources.kubevirt.io"},"spec":{"group":"subresources.kubevirt.io"}}`,
			cluster: `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.subresources.kubevirt.io"},"spec":{"group":"subresources.kubevirt.io"}}`},
		{name: "cdi untouched", component: `{"apiVersion":"cdi.kubevirt.io/v1beta1","kind":"DataVolume","metadata":{"labels":{"cdi.kubevirt.io/x":"1"}}}`,
			cluster: `{"apiVersion":"cdi.kubevirt.io/v1beta1","kind":"DataVolume","metadata":{"labels":{"cdi.kubevirt.io/x":"1"}}}`},
		{name: "merge patch with target", target: Target{"kubevirt.io", "VirtualMachine"}, component: `{"metadata":{"labels":{"kubevirt.io/foo":null}}}`, cluster: `{"metadata":{"labels":{"IK/foo":null}}}`},
		{name: "pod patch with target", target: Target{"", "Pod"}, component: `{"spec":{"nodeSelector":{"kubevirt.io/x":"1"}}}`, cluster: `{"spec":{"nodeSelector":{"IK/x":"1"}}}`},
	}, rw.Object)
}

func TestCRD(t *testing.T) {
	comp := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io","labels":{"kubevirt.io":""}},
		"spec":{"group":"kubevirt.io","names":{"kind":"VirtualMachine","listKind":"VirtualMachineList","plural":"virtualmachines","singular":"virtualmachine","shortNames":["vm","vms"],"categories":["all"]},"scope":"Namespaced",
		"versions":[{"name":"v1","schema":{"openAPIV3Schema":{"description":"VirtualMachine kubevirt.io","properties":{"kind":{"type":"string"}}}},"additionalPrinterColumns":[{"jsonPath":".status.printableStatus","name":"Status","type":"string"}]}]},
		"status":{"acceptedNames":{"kind":"VirtualMachine","listKind":"VirtualMachineList","plural":"virtualmachines","singular":"virtualmachine","shortNames":["vm","vms"],"categories":["all"]},"storedVersions":["v1"]}}`
	clus := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"internalvirtualizationvirtualmachines.IG","labels":{"IK":""}},
		"spec":{"group":"IG","names":{"kind":"InternalVirtualizationVirtualMachine","listKind":"InternalVirtualizationVirtualMachineList","plural":"internalvirtualizationvirtualmachines","singular":"internalvirtualizationvirtualmachine","shortNames":["intvirtvm","intvirtvms"],"categories":["intvirt"]},"scope":"Namespaced",
		"versions":[{"name":"v1","schema":{"openAPIV3Schema":{"description":"VirtualMachine kubevirt.io","properties":{"kind":{"type":"string"}}}},"additionalPrinterColumns":[{"jsonPath":".status.printableStatus","name":"Status","type":"string"}]}]},
		"status":{"acceptedNames":{"kind":"InternalVirtualizationVirtualMachine","listKind":"InternalVirtualizationVirtualMachineList","plural":"internalvirtualizationvirtualmachines","singular":"internalvirtualizationvirtualmachine","shortNames":["intvirtvm","intvirtvms"],"categories":["intvirt"]},"storedVersions":["v1"]}}`
	runVectors(t, []vector{{name: "crd", component: comp, cluster: clus}}, rw.Object)

	// A stock kubevirt.io CRD in the cluster is hidden from lists and watches.
	stock := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io"},"spec":{"group":"kubevirt.io","names":{"kind":"VirtualMachine","plural":"virtualmachines"}}}`
	other := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"datavolumes.cdi.kubevirt.io"},"spec":{"group":"cdi.kubevirt.io","names":{"kind":"DataVolume","plural":"datavolumes"}}}`
	list := `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{},"items":[` + stock + `,` + r(clus) + `, ` + other + `,` + stock + `]}`
	want := `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{},"items":[` + comp + `,` + other + `]}`
	got, err := rw.Object(Restore, []byte(list), Target{})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("crd list restore:\n%s", mustDiff(got, []byte(want)))
	}
	var sb bytes.Buffer
	if err := rw.ObjectStream(Restore, &sb, strings.NewReader(list), Target{}); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, sb.Bytes(), []byte(want)) {
		t.Errorf("crd list stream restore:\n%s", mustDiff(sb.Bytes(), []byte(want)))
	}
	ev := `{"type":"ADDED","object":` + stock + `}`
	out, drop, err := rw.WatchEvent(Restore, nil, []byte(ev), Target{})
	if err != nil || !drop || len(out) != 0 {
		t.Errorf("stock CRD event: drop=%v out=%s err=%v", drop, out, err)
	}
}

func TestDiscovery(t *testing.T) {
	runVectors(t, []vector{
		{name: "APIGroupList", oneWay: Restore, onlyOne: true,
			component: `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},{"name":"kubevirt.io","versions":[{"groupVersion":"kubevirt.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"kubevirt.io/v1","version":"v1"}},{"name":"subresources.kubevirt.io","versions":[{"groupVersion":"subresources.kubevirt.io/v1","version":"v1"}]}]}`,
			cluster:   `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},{"name":"kubevirt.io","versions":[{"groupVersion":"kubevirt.io/v1","version":"v1"}]},{"name":"IG","versions":[{"groupVersion":"IG/v1","version":"v1"}],"preferredVersion":{"groupVersion":"IG/v1","version":"v1"}},{"name":"subresources.kubevirt.io","versions":[{"groupVersion":"subresources.kubevirt.io/v1","version":"v1"}]}]}`},
		{name: "APIGroup", component: `{"kind":"APIGroup","apiVersion":"v1","name":"kubevirt.io","versions":[{"groupVersion":"kubevirt.io/v1","version":"v1"},{"groupVersion":"kubevirt.io/v1alpha3","version":"v1alpha3"}],"preferredVersion":{"groupVersion":"kubevirt.io/v1","version":"v1"}}`,
			cluster: `{"kind":"APIGroup","apiVersion":"v1","name":"IG","versions":[{"groupVersion":"IG/v1","version":"v1"},{"groupVersion":"IG/v1alpha3","version":"v1alpha3"}],"preferredVersion":{"groupVersion":"IG/v1","version":"v1"}}`},
		{name: "APIResourceList", component: `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"kubevirt.io/v1","resources":[{"name":"virtualmachines","singularName":"virtualmachine","namespaced":true,"kind":"VirtualMachine","verbs":["get","list"],"shortNames":["vm","vms"],"categories":["all"]},{"name":"virtualmachines/status","singularName":"","namespaced":true,"kind":"VirtualMachine","verbs":["get"]},{"name":"kubevirts","singularName":"kubevirt","namespaced":true,"kind":"KubeVirt","verbs":["get"],"shortNames":["kv","kvs"],"categories":["all"]}]}`,
			cluster: `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"IG/v1","resources":[{"name":"internalvirtualizationvirtualmachines","singularName":"internalvirtualizationvirtualmachine","namespaced":true,"kind":"InternalVirtualizationVirtualMachine","verbs":["get","list"],"shortNames":["intvirtvm","intvirtvms"],"categories":["intvirt"]},{"name":"internalvirtualizationvirtualmachines/status","singularName":"","namespaced":true,"kind":"InternalVirtualizationVirtualMachine","verbs":["get"]},{"name":"internalvirtualizationkubevirts","singularName":"internalvirtualizationkubevirt","namespaced":true,"kind":"InternalVirtualizationKubeVirt","verbs":["get"],"shortNames":["intvirtkv","intvirtkvs"],"categories":["intvirt"]}]}`},
		{name: "aggregated v2", oneWay: Restore, onlyOne: true,
			component: `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apps","creationTimestamp":null},"versions":[{"version":"v1","resources":[{"resource":"deployments","responseKind":{"group":"","version":"","kind":"Deployment"},"scope":"Namespaced","singularResource":"deployment","verbs":["get"]}],"freshness":"Current"}]},{"metadata":{"name":"kubevirt.io","creationTimestamp":null},"versions":[{"version":"v1","resources":[{"resource":"virtualmachines","responseKind":{"group":"","version":"","kind":"VirtualMachine"},"scope":"Namespaced","singularResource":"virtualmachine","verbs":["get"],"shortNames":["vm","vms"],"categories":["all"],"subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"VirtualMachine"},"verbs":["get"]}]}],"freshness":"Current"}]}]}`,
			cluster:   `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apps","creationTimestamp":null},"versions":[{"version":"v1","resources":[{"resource":"deployments","responseKind":{"group":"","version":"","kind":"Deployment"},"scope":"Namespaced","singularResource":"deployment","verbs":["get"]}],"freshness":"Current"}]},{"metadata":{"name":"kubevirt.io","creationTimestamp":null},"versions":[{"version":"v1","resources":[{"resource":"virtualmachines","responseKind":{"group":"","version":"","kind":"VirtualMachine"},"scope":"Namespaced"}]}]},{"metadata":{"name":"IG","creationTimestamp":null},"versions":[{"version":"v1","resources":[{"resource":"internalvirtualizationvirtualmachines","responseKind":{"group":"","version":"","kind":"InternalVirtualizationVirtualMachine"},"scope":"Namespaced","singularResource":"internalvirtualizationvirtualmachine","verbs":["get"],"shortNames":["intvirtvm","intvirtvms"],"categories":["intvirt"],"subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"InternalVirtualizationVirtualMachine"},"verbs":["get"]}]}],"freshness":"Current"}]}]}`},
		{name: "aggregated v2beta1", oneWay: Restore, onlyOne: true,
			component: `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2beta1","metadata":{},"items":[{"metadata":{"name":"clone.kubevirt.io"},"versions":[{"version":"v1beta1","resources":[{"resource":"virtualmachineclones","responseKind":{"group":"","version":"","kind":"VirtualMachineClone"},"shortNames":["vmclone","vmclones"]}]}]}]}`,
			cluster:   `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2beta1","metadata":{},"items":[{"metadata":{"name":"clone.kubevirt.io"},"versions":[]},{"metadata":{"name":"clone.IG"},"versions":[{"version":"v1beta1","resources":[{"resource":"internalvirtualizationvirtualmachineclones","responseKind":{"group":"","version":"","kind":"InternalVirtualizationVirtualMachineClone"},"shortNames":["intvirtvmclone","intvirtvmclones"]}]}]}]}`},
	}, rw.Object)
}

func TestStatusTableAdmission(t *testing.T) {
	runVectors(t, []vector{
		{name: "status 404", oneWay: Restore, onlyOne: true,
			component: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"virtualmachines.kubevirt.io \"x\" not found","reason":"NotFound","details":{"name":"x","group":"kubevirt.io","kind":"virtualmachines"},"code":404}`,
			cluster:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"internalvirtualizationvirtualmachines.IG \"x\" not found","reason":"NotFound","details":{"name":"x","group":"IG","kind":"internalvirtualizationvirtualmachines"},"code":404}`},
		{name: "status invalid", oneWay: Restore, onlyOne: true,
			component: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"VirtualMachine.kubevirt.io \"x\" is invalid: metadata.finalizers: kubevirt.io/foo","details":{"name":"x","group":"kubevirt.io","kind":"VirtualMachine","causes":[{"message":"InternalVirtualization is bad: VirtualMachineInstance","field":"spec"}]},"code":422}`,
			cluster:   `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"InternalVirtualizationVirtualMachine.IG \"x\" is invalid: metadata.finalizers: IK/foo","details":{"name":"x","group":"IG","kind":"InternalVirtualizationVirtualMachine","causes":[{"message":"InternalVirtualization is bad: InternalVirtualizationVirtualMachineInstance","field":"spec"}]},"code":422}`},
		{name: "status apply conflict", oneWay: Restore, onlyOne: true,
			component: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: conflict with \"kubectl\" using kubevirt.io/v1: .metadata.labels.kubevirt.io/x","reason":"Conflict","details":{"causes":[{"reason":"FieldManagerConflict","message":"conflict with \"kubectl\" using kubevirt.io/v1","field":".metadata.labels.kubevirt.io/x"},{"reason":"FieldManagerConflict","message":"conflict","field":".metadata.annotations.vm.kubevirt.io/y"}]},"code":409}`,
			cluster:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: conflict with \"kubectl\" using IG/v1: .metadata.labels.IK/x","reason":"Conflict","details":{"causes":[{"reason":"FieldManagerConflict","message":"conflict with \"kubectl\" using IG/v1","field":".metadata.labels.IK/x"},{"reason":"FieldManagerConflict","message":"conflict","field":".metadata.annotations.vm.IK/y"}]},"code":409}`},
		{name: "status crd not found", oneWay: Restore, onlyOne: true,
			component: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"customresourcedefinitions.apiextensions.k8s.io \"virtualmachines.kubevirt.io\" not found","reason":"NotFound","details":{"name":"virtualmachines.kubevirt.io","group":"apiextensions.k8s.io","kind":"customresourcedefinitions"},"code":404}`,
			cluster:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"customresourcedefinitions.apiextensions.k8s.io \"internalvirtualizationvirtualmachines.IG\" not found","reason":"NotFound","details":{"name":"internalvirtualizationvirtualmachines.IG","group":"apiextensions.k8s.io","kind":"customresourcedefinitions"},"code":404}`},
		{name: "table", component: `{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[{"name":"Name","type":"string"}],"rows":[{"cells":["a"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","labels":{"kubevirt.io/x":"1"},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"a"}]}}},{"cells":["b"],"object":{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","metadata":{"name":"b"}}}]}`,
			cluster: `{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[{"name":"Name","type":"string"}],"rows":[{"cells":["a"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","labels":{"IK/x":"1"},"ownerReferences":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","name":"a"}]}}},{"cells":["b"],"object":{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","metadata":{"name":"b"}}}]}`},
		{name: "admission request", component: `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"kubevirt.io","version":"v1","kind":"VirtualMachine"},"resource":{"group":"kubevirt.io","version":"v1","resource":"virtualmachines"},"requestKind":{"group":"kubevirt.io","version":"v1","kind":"VirtualMachine"},"requestResource":{"group":"kubevirt.io","version":"v1","resource":"virtualmachines"},"name":"x","operation":"UPDATE","object":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"labels":{"kubevirt.io/x":"1"}}},"oldObject":null}}`,
			cluster: `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"IG","version":"v1","kind":"InternalVirtualizationVirtualMachine"},"resource":{"group":"IG","version":"v1","resource":"internalvirtualizationvirtualmachines"},"requestKind":{"group":"IG","version":"v1","kind":"InternalVirtualizationVirtualMachine"},"requestResource":{"group":"IG","version":"v1","resource":"internalvirtualizationvirtualmachines"},"name":"x","operation":"UPDATE","object":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"labels":{"IK/x":"1"}}},"oldObject":null}}`},
	}, rw.Object)

	// response patch (base64 JSON patch), Rename on the way back
	patch := `[{"op":"add","path":"/metadata/labels/kubevirt.io~1foo","value":"bar"},{"op":"add","path":"/metadata/finalizers/-","value":"kubevirt.io/f"}]`
	want := r(`[{"op":"add","path":"/metadata/labels/IK~1foo","value":"bar"},{"op":"add","path":"/metadata/finalizers/-","value":"IK/f"}]`)
	resp := `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"u","allowed":true,"patchType":"JSONPatch","patch":"` + base64.StdEncoding.EncodeToString([]byte(patch)) + `"}}`
	out, err := rw.AdmissionReview(Rename, []byte(resp), Target{"kubevirt.io", "VirtualMachine"})
	if err != nil {
		t.Fatal(err)
	}
	var ar struct{ Response struct{ Patch []byte } }
	if err := json.Unmarshal(out, &ar); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, ar.Response.Patch, []byte(want)) {
		t.Errorf("admission patch: %s", ar.Response.Patch)
	}
	// denial message arrives intact
	deny := `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"u","allowed":false,"status":{"code":422,"message":"spec.template.spec.domain.devices.disks[0].Name 'x' not found."}}}`
	out, err = rw.AdmissionReview(Rename, []byte(deny), Target{})
	if err != nil || string(out) != deny {
		t.Errorf("denial changed: %s %v", out, err)
	}
}

func TestPatches(t *testing.T) {
	vmT := Target{"kubevirt.io", "VirtualMachine"}
	podT := Target{"", "Pod"}
	type pv struct {
		name, ct string
		t        Target
		comp     string
		clus     string
	}
	for _, v := range []pv{
		{"json patch all ops", ContentTypeJSONPatch, vmT,
			`[{"op":"test","path":"/metadata/labels/kubevirt.io~1foo","value":"bar"},{"op":"replace","path":"/metadata/labels/kubevirt.io~1foo","value":"baz"},{"op":"remove","path":"/metadata/labels/kubevirt.io"},{"op":"add","path":"/metadata/finalizers/-","value":"kubevirt.io/f"},{"op":"add","path":"/metadata/ownerReferences/0","value":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"o"}},{"op":"move","from":"/metadata/annotations/kubevirt.io~1a","path":"/metadata/annotations/kubevirt.io~1b"},{"op":"copy","from":"/metadata/labels/x","path":"/metadata/labels/kubevirt.io~1y"},{"op":"add","path":"/metadata/labels","value":{"kubevirt.io":"virt-launcher","app.kubernetes.io/managed-by":"virt-operator"}},{"op":"test","path":"/metadata/labels/app.kubernetes.io~1managed-by","value":"virt-operator"},{"op":"replace","path":"/spec/running","value":true},{"op":"add","path":"/metadata/ownerReferences/0/apiVersion","value":"kubevirt.io/v1"},{"op":"add","path":"/metadata/labels/a~0b","value":"c"}]`,
			`[{"op":"test","path":"/metadata/labels/IK~1foo","value":"bar"},{"op":"replace","path":"/metadata/labels/IK~1foo","value":"baz"},{"op":"remove","path":"/metadata/labels/IK"},{"op":"add","path":"/metadata/finalizers/-","value":"IK/f"},{"op":"add","path":"/metadata/ownerReferences/0","value":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","name":"o"}},{"op":"move","from":"/metadata/annotations/IK~1a","path":"/metadata/annotations/IK~1b"},{"op":"copy","from":"/metadata/labels/x","path":"/metadata/labels/IK~1y"},{"op":"add","path":"/metadata/labels","value":{"IK":"virt-launcher","app.kubernetes.io/managed-by":"virt-operator-internal-virtualization"}},{"op":"test","path":"/metadata/labels/app.kubernetes.io~1managed-by","value":"virt-operator-internal-virtualization"},{"op":"replace","path":"/spec/running","value":true},{"op":"add","path":"/metadata/ownerReferences/0/apiVersion","value":"IG/v1"},{"op":"add","path":"/metadata/labels/a~0b","value":"c"}]`},
		{"json patch pod nodeSelector", ContentTypeJSONPatch, podT,
			`[{"value":{"kubevirt.io/x":"1"},"op":"add","path":"/spec/nodeSelector"},{"op":"add","path":"/spec/nodeSelector/cpu-model.node.kubevirt.io~1X","value":"true"}]`,
			`[{"value":{"IK/x":"1"},"op":"add","path":"/spec/nodeSelector"},{"op":"add","path":"/spec/nodeSelector/cpu-model.node.virtualization.deckhouse.io~1X","value":"true"}]`},
		{"json patch whole object", ContentTypeJSONPatch, vmT,
			`[{"op":"replace","path":"","value":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"labels":{"kubevirt.io":"x"}}}}]`,
			`[{"op":"replace","path":"","value":{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"labels":{"IK":"x"}}}}]`},
		{"merge patch", ContentTypeMergePatch + "; charset=utf-8", vmT,
			`{"metadata":{"labels":{"kubevirt.io/foo":"bar","kubevirt.io/gone":null},"finalizers":["kubevirt.io/f"]},"spec":{"running":false}}`,
			`{"metadata":{"labels":{"IK/foo":"bar","IK/gone":null},"finalizers":["IK/f"]},"spec":{"running":false}}`},
		{"strategic merge patch", ContentTypeStrategicMerge, podT,
			`{"metadata":{"$setElementOrder/finalizers":["kubevirt.io/a","other"],"$deleteFromPrimitiveList/finalizers":["kubevirt.io/b"],"finalizers":["kubevirt.io/a"],"labels":{"$patch":"replace","kubevirt.io":"x"},"ownerReferences":[{"$patch":"delete","uid":"1"},{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","uid":"2"}],"$retainKeys":["labels"]},"spec":{"nodeSelector":{"kubevirt.io/x":null}}}`,
			`{"metadata":{"$setElementOrder/finalizers":["IK/a","other"],"$deleteFromPrimitiveList/finalizers":["IK/b"],"finalizers":["IK/a"],"labels":{"$patch":"replace","IK":"x"},"ownerReferences":[{"$patch":"delete","uid":"1"},{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachineInstance","uid":"2"}],"$retainKeys":["labels"]},"spec":{"nodeSelector":{"IK/x":null}}}`},
		{"apply json", ContentTypeApplyJSON, vmT,
			`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"a","labels":{"kubevirt.io/x":"1"}}}`,
			`{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"a","labels":{"IK/x":"1"}}}`},
	} {
		t.Run(v.name, func(t *testing.T) {
			got, err := rw.Patch(Rename, v.ct, []byte(v.comp), v.t)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(r(v.clus))) {
				t.Errorf("rename\n got %s\nwant %s", got, r(v.clus))
			}
			back, err := rw.Patch(Restore, v.ct, got, clusterTarget(v.t))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, back, []byte(v.comp)) {
				t.Errorf("restore\n got %s\nwant %s", back, v.comp)
			}
		})
	}
	yml := "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: a\n  labels:\n    kubevirt.io/x: \"1\"\n"
	got, err := rw.Patch(Rename, ContentTypeApplyYAML, []byte(yml), vmT)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, []byte(r(`{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"a","labels":{"IK/x":"1"}}}`))) {
		t.Errorf("yaml apply: %s", got)
	}
	if _, err := rw.Patch(Rename, "application/apply-patch+cbor", []byte{0xa0}, vmT); err != ErrUnsupportedContentType {
		t.Errorf("cbor: %v", err)
	}
}

func TestPaths(t *testing.T) {
	for _, v := range []struct{ comp, clus string }{
		{"/apis/kubevirt.io/v1/namespaces/x/virtualmachines/y/status", "/apis/IG/v1/namespaces/x/internalvirtualizationvirtualmachines/y/status"},
		{"/apis/kubevirt.io/v1/virtualmachineinstances", "/apis/IG/v1/internalvirtualizationvirtualmachineinstances"},
		{"/apis/kubevirt.io/v1/watch/namespaces/x/virtualmachineinstances", "/apis/IG/v1/watch/namespaces/x/internalvirtualizationvirtualmachineinstances"},
		{"/apis/kubevirt.io", "/apis/IG"},
		{"/apis/kubevirt.io/", "/apis/IG/"},
		{"/apis/snapshot.kubevirt.io/v1beta1", "/apis/snapshot.IG/v1beta1"},
		{"/apis/instancetype.kubevirt.io/v1beta1/virtualmachineclusterinstancetypes/small", "/apis/instancetype.IG/v1beta1/internalvirtualizationvirtualmachineclusterinstancetypes/small"},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualmachines.kubevirt.io", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/internalvirtualizationvirtualmachines.IG"},
		{"/apis/apiregistration.k8s.io/v1/apiservices/v1.kubevirt.io", "/apis/apiregistration.k8s.io/v1/apiservices/v1.IG"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/x/virtualmachines/y/start", "/apis/subresources.kubevirt.io/v1/namespaces/x/virtualmachines/y/start"},
		{"/apis/virtualization.deckhouse.io/v1alpha2/virtualmachines", "/apis/virtualization.deckhouse.io/v1alpha2/virtualmachines"},
		{"/api/v1/namespaces/x/pods", "/api/v1/namespaces/x/pods"},
		{"/apis", "/apis"},
		{"/healthz", "/healthz"},
	} {
		got, _ := rw.Path(Rename, v.comp)
		if got != r(v.clus) {
			t.Errorf("rename %s: got %s want %s", v.comp, got, r(v.clus))
		}
		back, _ := rw.Path(Restore, r(v.clus))
		if back != v.comp {
			t.Errorf("restore %s: got %s want %s", r(v.clus), back, v.comp)
		}
	}
	ri := ParsePath("/apis/kubevirt.io/v1/namespaces/ns/virtualmachines/vm/status")
	want := RequestInfo{Kind: PathResource, Group: "kubevirt.io", Version: "v1", Namespace: "ns", Resource: "virtualmachines", Name: "vm", Subresource: "status"}
	if ri != want {
		t.Errorf("ParsePath: %+v", ri)
	}
	if ri := ParsePath("/api/v1/namespaces/ns/status"); ri.Resource != "namespaces" || ri.Name != "ns" || ri.Subresource != "status" {
		t.Errorf("namespace status: %+v", ri)
	}
	if ri := ParsePath("/api/v1/namespaces/ns/pods/p/exec"); ri.Namespace != "ns" || ri.Resource != "pods" || ri.Name != "p" || ri.Subresource != "exec" {
		t.Errorf("pod exec: %+v", ri)
	}
	if tg := rw.TargetFor(Rename, ri); tg != (Target{"kubevirt.io", "VirtualMachine"}) {
		t.Errorf("TargetFor: %+v", tg)
	}
}

func TestQuery(t *testing.T) {
	crd := ParsePath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
	ev := ParsePath("/api/v1/events")
	for _, v := range []struct {
		ri         RequestInfo
		comp, clus string
		oneWay     bool // a term is dropped
	}{
		{ev, "labelSelector=kubevirt.io%3Dvirt-launcher&watch=true", "labelSelector=IK%3Dvirt-launcher&watch=true", false},
		{ev, "labelSelector=" + qe("kubevirt.io/created-by in (a, b),!kubevirt.io/x,app.kubernetes.io/managed-by!=virt-operator,app.kubernetes.io/managed-by in (virt-operator,y),vm.kubevirt.io/name"),
			"labelSelector=" + qe(r("IK/created-by in (a, b),!IK/x,app.kubernetes.io/managed-by!=virt-operator-internal-virtualization,app.kubernetes.io/managed-by in (virt-operator-internal-virtualization,y),vm.IK/name")), false},
		{crd, "fieldSelector=metadata.name%3Dvirtualmachines.kubevirt.io&resourceVersion=1", "fieldSelector=" + qe(r("metadata.name=internalvirtualizationvirtualmachines.IG")) + "&resourceVersion=1", false},
		{ev, "fieldSelector=" + qe("involvedObject.kind=VirtualMachine,involvedObject.apiVersion=kubevirt.io/v1,involvedObject.name=x"),
			"fieldSelector=" + qe(r("involvedObject.kind=InternalVirtualizationVirtualMachine,involvedObject.apiVersion=IG/v1,involvedObject.name=x")), false},
		{ev, "fieldSelector=" + qe("involvedObject.kind=VirtualMachine"), "fieldSelector=" + qe("involvedObject.kind=VirtualMachine"), false},
		// kubectl describe: no apiVersion, but the uid names the object, internal or friendly.
		{ev, "fieldSelector=" + qe("involvedObject.name=x,involvedObject.namespace=ns,involvedObject.kind=VirtualMachine,involvedObject.uid=u1"),
			"fieldSelector=" + qe("involvedObject.name=x,involvedObject.namespace=ns,involvedObject.uid=u1"), true},
		{ev, "fieldSelector=" + qe("involvedObject.kind=VirtualMachineInstance,involvedObject.uid==u1"), "fieldSelector=" + qe("involvedObject.uid==u1"), true},
		{ParsePath("/apis/events.k8s.io/v1/namespaces/ns/events"), "fieldSelector=" + qe("regarding.kind=VirtualMachine,regarding.uid=u1,regarding.name=x"),
			"fieldSelector=" + qe("regarding.uid=u1,regarding.name=x"), true},
		// Core kinds, and uids of another object or negated, keep the kind.
		{ev, "fieldSelector=" + qe("involvedObject.name=p,involvedObject.namespace=ns,involvedObject.kind=Pod,involvedObject.uid=u1"),
			"fieldSelector=" + qe("involvedObject.name=p,involvedObject.namespace=ns,involvedObject.kind=Pod,involvedObject.uid=u1"), false},
		{ev, "fieldSelector=" + qe("involvedObject.kind=VirtualMachine,involvedObject.uid!=u1"), "fieldSelector=" + qe("involvedObject.kind=VirtualMachine,involvedObject.uid!=u1"), false},
		{ev, "fieldSelector=" + qe("involvedObject.kind=VirtualMachine,related.uid=u1"), "fieldSelector=" + qe("involvedObject.kind=VirtualMachine,related.uid=u1"), false},
		{ev, "limit=500", "limit=500", false},
	} {
		got, err := rw.Query(Rename, v.ri, v.comp)
		if err != nil || got != r(v.clus) {
			t.Errorf("rename %s: got %s want %s (%v)", v.comp, got, r(v.clus), err)
		}
		if v.oneWay {
			continue
		}
		back, err := rw.Query(Restore, v.ri, got)
		if err != nil || back != v.comp {
			t.Errorf("restore %s: got %s want %s (%v)", got, back, v.comp, err)
		}
	}
	if _, err := rw.LabelSelector(Rename, "a in (b"); err == nil {
		t.Error("unbalanced selector accepted")
	}
}

func qe(s string) string {
	return strings.NewReplacer("=", "%3D", " ", "+", ",", "%2C", "/", "%2F", "(", "%28", ")", "%29", "!", "%21").Replace(s)
}

func TestWatchEvents(t *testing.T) {
	for _, v := range []struct{ comp, clus string }{
		{`{"type":"ADDED","object":{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","metadata":{"labels":{"kubevirt.io/x":"1"}}}}`,
			`{"type":"ADDED","object":{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","metadata":{"labels":{"IK/x":"1"}}}}`},
		{`{"type":"BOOKMARK","object":{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			`{"type":"BOOKMARK","object":{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`},
		{`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}`,
			`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}`},
		{`{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"kubevirt.io":"virt-launcher"}}}}` + "\n",
			`{"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"IK":"virt-launcher"}}}}` + "\n"},
	} {
		got, drop, err := rw.WatchEvent(Rename, nil, []byte(v.comp), Target{})
		if err != nil || drop || string(got) != r(v.clus) {
			t.Errorf("rename event: %s %v %v", got, drop, err)
		}
		back, drop, err := rw.WatchEvent(Restore, []byte("prefix"), []byte(r(v.clus)), Target{})
		if err != nil || drop || string(back) != "prefix"+v.comp {
			t.Errorf("restore event: %s %v %v", back, drop, err)
		}
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `{"kind":"Pod"`, `{"metadata":{"labels":{"kubevirt.io":}}}`, `{"a":[1,2}`, `{"a":1}}`, `{"a":1} x`,
		`{"metadata":{"labels":{"kubevirt.io":"x",}}}`, `{"spec":{"x":[1,,2]}}`, `{"spec":{"x":tru}}`, `{"spec":{"x":"unterminated}}`, `[1,2`, `{"spec":{"a" 1}}`, `{"spec":{"a":01}}`} {
		if out, err := rw.Object(Restore, []byte(in), Target{}); err == nil {
			t.Errorf("%q: no error, out %q", in, out)
		}
		if err := rw.ObjectStream(Restore, &bytes.Buffer{}, strings.NewReader(in), Target{}); err == nil && in != `{"a":1} x` {
			t.Errorf("stream %q: no error", in)
		}
	}
}

func TestStreamMatchesObject(t *testing.T) {
	body := podList(20)
	want, err := rw.Object(Restore, body, Target{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rw.ObjectStream(Restore, &buf, &slowReader{b: body}, Target{}); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, buf.Bytes(), want) {
		t.Errorf("stream differs:\n%s", mustDiff(buf.Bytes(), want))
	}
	// sorted CR list: kind after items
	in := r(`{"apiVersion":"IG/v1","items":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{}}],"kind":"InternalVirtualizationVirtualMachineList","metadata":{"resourceVersion":"1"}}`)
	buf.Reset()
	if err := rw.ObjectStream(Restore, &buf, strings.NewReader(in), Target{}); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, buf.Bytes(), []byte(`{"apiVersion":"kubevirt.io/v1","items":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{}}],"kind":"VirtualMachineList","metadata":{"resourceVersion":"1"}}`)) {
		t.Errorf("stream CR list: %s", buf.Bytes())
	}
}

type slowReader struct {
	b []byte
	n int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, ioEOF
	}
	s.n = (s.n*7 + 13) % 4000
	k := min(len(p), len(s.b), s.n+1)
	copy(p, s.b[:k])
	s.b = s.b[k:]
	return k, nil
}

func TestDiff(t *testing.T) {
	cs, err := Diff([]byte(`{"a":{"b":"x","c":[1,2]},"kubevirt.io/x":1}`), []byte(`{"a":{"b":"y","c":[1]},"IK/x":1}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := FormatDiff(cs)
	want := "[\"IK/x\"]: (absent) -> 1\na.b: \"x\" -> \"y\"\na.c[1]: 2 -> (absent)\n[\"kubevirt.io/x\"]: 1 -> (absent)\n"
	if got != want {
		t.Errorf("diff:\n%s\nwant\n%s", got, want)
	}
}

// TestJSONPatchOwnerReferenceField: a patch of one field of an owner reference is completed from
// the object as the cluster holds it, with a test of the sibling it was completed from.
func TestJSONPatchOwnerReferenceField(t *testing.T) {
	current := r(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","ownerReferences":[
		{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachineInstance","name":"vmi","uid":"1"},
		{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","name":"front","uid":"2"}]}}`)
	podT := Target{"", "Pod"}
	for _, tc := range []struct{ name, patch, want string }{
		{"kind alone, renamed owner", `[{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachine"}]`,
			`[{"op":"test","path":"/metadata/ownerReferences/0/apiVersion","value":"IG/v1"},{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"InternalVirtualizationVirtualMachine"}]`},
		{"kind alone, friendly owner", `[{"op":"replace","path":"/metadata/ownerReferences/1/kind","value":"VirtualDisk"}]`,
			`[{"op":"test","path":"/metadata/ownerReferences/1/apiVersion","value":"virtualization.deckhouse.io/v1alpha2"},{"op":"replace","path":"/metadata/ownerReferences/1/kind","value":"VirtualDisk"}]`},
		{"apiVersion alone, to kubevirt.io", `[{"op":"replace","path":"/metadata/ownerReferences/1/apiVersion","value":"kubevirt.io/v1"}]`,
			`[{"op":"replace","path":"/metadata/ownerReferences/1/apiVersion","value":"IG/v1"},{"op":"test","path":"/metadata/ownerReferences/1/kind","value":"VirtualMachine"},{"op":"replace","path":"/metadata/ownerReferences/1/kind","value":"InternalVirtualizationVirtualMachine"}]`},
		{"apiVersion alone, away from kubevirt.io", `[{"op":"replace","path":"/metadata/ownerReferences/0/apiVersion","value":"example.com/v1"}]`,
			`[{"op":"replace","path":"/metadata/ownerReferences/0/apiVersion","value":"example.com/v1"},{"op":"test","path":"/metadata/ownerReferences/0/kind","value":"InternalVirtualizationVirtualMachineInstance"},{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachineInstance"}]`},
		{"apiVersion alone, same kind", `[{"op":"replace","path":"/metadata/ownerReferences/0/apiVersion","value":"kubevirt.io/v1"}]`,
			`[{"op":"replace","path":"/metadata/ownerReferences/0/apiVersion","value":"IG/v1"}]`},
		{"both, in separate ops", `[{"op":"replace","path":"/metadata/ownerReferences/1/kind","value":"VirtualMachine"},{"op":"replace","path":"/metadata/ownerReferences/1/apiVersion","value":"kubevirt.io/v1"},{"op":"remove","path":"/metadata/labels/kubevirt.io"}]`,
			`[{"op":"replace","path":"/metadata/ownerReferences/1/kind","value":"InternalVirtualizationVirtualMachine"},{"op":"replace","path":"/metadata/ownerReferences/1/apiVersion","value":"IG/v1"},{"op":"remove","path":"/metadata/labels/IK"}]`},
		{"an owner the object does not have", `[{"op":"add","path":"/metadata/ownerReferences/5/kind","value":"VirtualMachine"}]`,
			`[{"op":"add","path":"/metadata/ownerReferences/5/kind","value":"VirtualMachine"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !rw.JSONPatchNeedsObject([]byte(tc.patch)) && !strings.Contains(tc.name, "both") {
				t.Errorf("JSONPatchNeedsObject false")
			}
			got, err := rw.JSONPatchWithObject([]byte(tc.patch), []byte(current), podT)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(r(tc.want))) {
				t.Errorf("\n got %s\nwant %s", got, r(tc.want))
			}
		})
	}
	if rw.JSONPatchNeedsObject([]byte(`[{"op":"replace","path":"/metadata/ownerReferences/0","value":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine"}}]`)) {
		t.Error("a whole owner reference needs no object")
	}
}

// TestJSONPatchOwnerReferenceFieldsTogether: both fields set in one patch need no object.
func TestJSONPatchOwnerReferenceFieldsTogether(t *testing.T) {
	patch := `[{"op":"add","path":"/metadata/ownerReferences/0/apiVersion","value":"kubevirt.io/v1"},{"op":"add","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachineInstance"}]`
	want := r(`[{"op":"add","path":"/metadata/ownerReferences/0/apiVersion","value":"IG/v1"},{"op":"add","path":"/metadata/ownerReferences/0/kind","value":"InternalVirtualizationVirtualMachineInstance"}]`)
	got, err := rw.Patch(Rename, ContentTypeJSONPatch, []byte(patch), Target{"", "Pod"})
	if err != nil || !jsonEqual(t, got, []byte(want)) {
		t.Errorf("got %s (%v)\nwant %s", got, err, want)
	}
}
