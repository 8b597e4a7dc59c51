// Package vmclass is the VirtualMachineClass controller: the class's phase and available nodes,
// and a finalizer that keeps a class in use from being deleted.
//
// The decisions are pure (this file); the reconciler reads the objects and carries them out.
package vmclass

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmclasscondition"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// Finalizer keeps a class while VirtualMachines use it.
const Finalizer = "virtualization.deckhouse.io/vmclass-cleanup"

// AvailableNodes are the nodes the class's machines can run on, sorted by name: those its node
// selector matches whose NoSchedule and NoExecute taints its tolerations tolerate.
func AvailableNodes(class *v1alpha3.VirtualMachineClass, nodes []corev1.Node) ([]corev1.Node, error) {
	sel, err := selector(class.Spec.NodeSelector)
	if err != nil {
		return nil, err
	}
	var out []corev1.Node
	for i := range nodes {
		n := &nodes[i]
		if sel.Matches(labels.Set(n.Labels)) && tolerated(class.Spec.Tolerations, n.Spec.Taints) {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Names are the nodes' names, in their order.
func Names(nodes []corev1.Node) []string {
	var out []string
	for i := range nodes {
		out = append(out, nodes[i].Name)
	}
	return out
}

func selector(ns v1alpha2.NodeSelector) (labels.Selector, error) {
	sel := labels.SelectorFromSet(ns.MatchLabels)
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}
	for i, e := range ns.MatchExpressions {
		op, ok := ops[e.Operator]
		if !ok {
			return nil, fmt.Errorf("spec.nodeSelector.matchExpressions[%d].operator %q is not supported", i, e.Operator)
		}
		req, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return nil, fmt.Errorf("spec.nodeSelector.matchExpressions[%d]: %w", i, err)
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

func tolerated(tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Users are the "namespace/name" of the VMs that name the class, sorted.
func Users(class string, vms []v1alpha2.VirtualMachine) []string {
	var out []string
	for i := range vms {
		if vms[i].Spec.VirtualMachineClassName == class {
			out = append(out, vms[i].Namespace+"/"+vms[i].Name)
		}
	}
	sort.Strings(out)
	return out
}

// Status is the class's status from its available nodes (nil when the selector is bad: problem
// says why), what its processor feature discovery found, and the VMs that use it. A class is
// Ready when it has available nodes and, for type Discovery, its features.
func Status(class *v1alpha3.VirtualMachineClass, nodes []string, problem string, found Discovery, users []string, now metav1.Time) v1alpha2.VirtualMachineClassStatus {
	st := *class.Status.DeepCopy()
	st.AvailableNodes = nodes
	st.CPUFeatures = found.Features
	st.ObservedGeneration = class.Generation
	isDiscovery := class.Spec.CPU.Type == v1alpha2.CPUTypeDiscovery
	switch {
	case class.DeletionTimestamp != nil:
		st.Phase = v1alpha2.ClassPhaseTerminating
	case problem != "" || len(nodes) == 0 || (isDiscovery && found.Problem != ""):
		st.Phase = v1alpha2.ClassPhasePending
	default:
		st.Phase = v1alpha2.ClassPhaseReady
	}
	inUse := metav1.Condition{Type: string(vmclasscondition.TypeInUse), Status: metav1.ConditionFalse,
		Reason: string(vmclasscondition.ReasonVMClassFree), Message: "no VirtualMachine uses the class"}
	if len(users) > 0 {
		inUse.Status, inUse.Reason = metav1.ConditionTrue, string(vmclasscondition.ReasonVMClassInUse)
		inUse.Message = "used by VirtualMachines " + strings.Join(users, ", ")
	}
	discovered := metav1.Condition{Type: string(vmclasscondition.TypeDiscovered), Status: metav1.ConditionFalse,
		Reason: string(vmclasscondition.ReasonDiscoverySkip), Message: "the class's processor is not of type Discovery"}
	switch {
	case problem != "":
		discovered.Reason, discovered.Message = string(vmclasscondition.ReasonDiscoveryFailed), problem
	case isDiscovery && found.Problem != "":
		discovered.Reason, discovered.Message = string(vmclasscondition.ReasonDiscoveryFailed), found.Problem
	case isDiscovery:
		discovered.Status, discovered.Reason = metav1.ConditionTrue, string(vmclasscondition.ReasonDiscoverySucceeded)
		discovered.Message = fmt.Sprintf("%d processor features common to the nodes %s", len(found.Features.Enabled), strings.Join(found.Nodes, ", "))
	}
	for _, c := range []metav1.Condition{inUse, discovered} {
		c.ObservedGeneration, c.LastTransitionTime = class.Generation, now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}
