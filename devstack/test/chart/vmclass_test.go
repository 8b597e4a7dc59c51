package chart

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGenericClass: the chart installs the VirtualMachineClass generic (CPU model Nehalem), the
// default class unless genericVirtualMachineClass.default is false, and none with enabled false.
func TestGenericClass(t *testing.T) {
	const annotation = "virtualmachineclass.virtualization.deckhouse.io/is-default-class"
	classes := func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "VirtualMachineClass" {
				out = append(out, o)
			}
		}
		return out
	}
	generic := find(t, decode(t, render(t)), "VirtualMachineClass", "generic")
	if generic.GetAPIVersion() != "virtualization.deckhouse.io/v1alpha3" || generic.GetAnnotations()[annotation] != "true" || generic.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("generic: %s %v", generic.GetAPIVersion(), generic.GetAnnotations())
	}
	if model, _, _ := unstructured.NestedString(generic.Object, "spec", "cpu", "model"); model != "Nehalem" {
		t.Errorf("generic's CPU model %q", model)
	}
	if policies, _, _ := unstructured.NestedSlice(generic.Object, "spec", "sizingPolicies"); len(policies) != 4 {
		t.Errorf("generic's sizing policies: %v", policies)
	}
	notDefault := find(t, decode(t, render(t, "--set", "genericVirtualMachineClass.default=false")), "VirtualMachineClass", "generic")
	if _, ok := notDefault.GetAnnotations()[annotation]; ok {
		t.Errorf("default=false still annotates generic: %v", notDefault.GetAnnotations())
	}
	if got := classes(decode(t, render(t, "--set", "genericVirtualMachineClass.enabled=false"))); len(got) != 0 {
		t.Errorf("enabled=false renders %d classes", len(got))
	}
}
