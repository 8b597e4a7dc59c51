// Package conversion converts VirtualMachineClass between v1alpha2 (core fractions as integers)
// and v1alpha3 (core fractions as "5%" strings) without losing anything: both directions are
// pure functions, and what v1alpha2 cannot hold (a v1alpha3 fraction that is not the canonical
// percentage of an integer, such as "05%") travels in the annotation AnnotationCoreFractions.
// The conversion webhook of virtualization-controller will call these functions.
package conversion

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

// AnnotationCoreFractions holds, on a v1alpha2 object, the v1alpha3 core fractions of every sizing
// policy when one of them has no exact integer form. The key is reserved: the conversion sets and
// removes it.
const AnnotationCoreFractions = "virtualization.deckhouse.io/v1alpha3-core-fractions"

// policyFractions are the v1alpha3 core fractions of one sizing policy, as the annotation holds them.
type policyFractions struct {
	CoreFractions       []v1alpha3.CoreFractionValue `json:"coreFractions"`
	DefaultCoreFraction *v1alpha3.CoreFractionValue  `json:"defaultCoreFraction"`
}

// ClassToV1alpha3 converts a v1alpha2 VirtualMachineClass to v1alpha3. Fractions an annotation
// carries are restored when the v1alpha2 values still are what ClassToV1alpha2 made of them (a
// policy changed since gets the plain percentages).
func ClassToV1alpha3(in *v1alpha2.VirtualMachineClass) (*v1alpha3.VirtualMachineClass, error) {
	spec := in.Spec.DeepCopy()
	out := &v1alpha3.VirtualMachineClass{
		TypeMeta:   typeMeta(v1alpha3.SchemeGroupVersion.String()),
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec:       v1alpha3.VirtualMachineClassSpec{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, CPU: spec.CPU},
		Status:     *in.Status.DeepCopy(),
	}
	var kept []policyFractions
	if raw, ok := in.Annotations[AnnotationCoreFractions]; ok {
		if err := json.Unmarshal([]byte(raw), &kept); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", AnnotationCoreFractions, err)
		}
		out.Annotations = withoutKey(out.Annotations)
	}
	if in.Spec.SizingPolicies != nil {
		out.Spec.SizingPolicies = make([]v1alpha3.SizingPolicy, len(in.Spec.SizingPolicies))
	}
	for i, p := range spec.SizingPolicies {
		f := percentages(p)
		if len(kept) == len(in.Spec.SizingPolicies) && sameIntegers(integers(kept[i]), p) {
			f = kept[i]
		}
		out.Spec.SizingPolicies[i] = v1alpha3.SizingPolicy{
			SizingPolicyResources: p.SizingPolicyResources,
			CoreFractions:         f.CoreFractions,
			DefaultCoreFraction:   f.DefaultCoreFraction,
		}
	}
	return out, nil
}

// ClassToV1alpha2 converts a v1alpha3 VirtualMachineClass to v1alpha2. A fraction that is not
// the canonical percentage of an integer becomes the integer it starts with (0 when none), and
// the v1alpha3 fractions of every policy go into AnnotationCoreFractions.
func ClassToV1alpha2(in *v1alpha3.VirtualMachineClass) (*v1alpha2.VirtualMachineClass, error) {
	spec := in.Spec.DeepCopy()
	out := &v1alpha2.VirtualMachineClass{
		TypeMeta:   typeMeta(v1alpha2.SchemeGroupVersion.String()),
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec:       v1alpha2.VirtualMachineClassSpec{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, CPU: spec.CPU},
		Status:     *in.Status.DeepCopy(),
	}
	if _, ok := out.Annotations[AnnotationCoreFractions]; ok {
		out.Annotations = withoutKey(out.Annotations)
	}
	if in.Spec.SizingPolicies != nil {
		out.Spec.SizingPolicies = make([]v1alpha2.SizingPolicy, len(in.Spec.SizingPolicies))
	}
	lossy := false
	all := make([]policyFractions, len(in.Spec.SizingPolicies))
	for i, p := range spec.SizingPolicies {
		all[i] = policyFractions{CoreFractions: p.CoreFractions, DefaultCoreFraction: p.DefaultCoreFraction}
		ints := integers(all[i])
		lossy = lossy || !sameFractions(percentages(ints), all[i])
		ints.SizingPolicyResources = p.SizingPolicyResources
		out.Spec.SizingPolicies[i] = ints
	}
	if lossy {
		raw, err := json.Marshal(all)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", AnnotationCoreFractions, err)
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[AnnotationCoreFractions] = string(raw)
	}
	return out, nil
}

func typeMeta(apiVersion string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: "VirtualMachineClass"}
}

// withoutKey is a copy of the annotations without AnnotationCoreFractions; nil when nothing else
// is left, as a map that held only the conversion's key was nil before.
func withoutKey(a map[string]string) map[string]string {
	out := maps.Clone(a)
	delete(out, AnnotationCoreFractions)
	if len(out) == 0 {
		return nil
	}
	return out
}

// percentages is the v1alpha3 form of a v1alpha2 policy's fractions.
func percentages(p v1alpha2.SizingPolicy) policyFractions {
	var f policyFractions
	if p.CoreFractions != nil {
		f.CoreFractions = make([]v1alpha3.CoreFractionValue, len(p.CoreFractions))
		for i, n := range p.CoreFractions {
			f.CoreFractions[i] = percentage(n)
		}
	}
	if p.DefaultCoreFraction != nil {
		d := percentage(*p.DefaultCoreFraction)
		f.DefaultCoreFraction = &d
	}
	return f
}

// integers is the v1alpha2 form of v1alpha3 fractions (without the policy's resources).
func integers(f policyFractions) v1alpha2.SizingPolicy {
	var p v1alpha2.SizingPolicy
	if f.CoreFractions != nil {
		p.CoreFractions = make([]v1alpha2.CoreFractionValue, len(f.CoreFractions))
		for i, s := range f.CoreFractions {
			p.CoreFractions[i] = integer(s)
		}
	}
	if f.DefaultCoreFraction != nil {
		d := integer(*f.DefaultCoreFraction)
		p.DefaultCoreFraction = &d
	}
	return p
}

func percentage(n v1alpha2.CoreFractionValue) v1alpha3.CoreFractionValue {
	return v1alpha3.CoreFractionValue(strconv.Itoa(int(n)) + "%")
}

// integer is the integer a percentage starts with: "5%" is 5; "x", and a number too large for an
// int, are 0.
func integer(s v1alpha3.CoreFractionValue) v1alpha2.CoreFractionValue {
	str := string(s)
	end := 0
	if end < len(str) && (str[end] == '-' || str[end] == '+') {
		end++
	}
	for end < len(str) && str[end] >= '0' && str[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(str[:end])
	if err != nil {
		return 0
	}
	return v1alpha2.CoreFractionValue(n)
}

func sameIntegers(a, b v1alpha2.SizingPolicy) bool {
	return sameFractions(percentages(a), percentages(b))
}

// sameFractions compares two policies' fractions, nil and empty lists apart.
func sameFractions(a, b policyFractions) bool {
	if (a.CoreFractions == nil) != (b.CoreFractions == nil) || len(a.CoreFractions) != len(b.CoreFractions) {
		return false
	}
	for i := range a.CoreFractions {
		if a.CoreFractions[i] != b.CoreFractions[i] {
			return false
		}
	}
	if (a.DefaultCoreFraction == nil) != (b.DefaultCoreFraction == nil) {
		return false
	}
	return a.DefaultCoreFraction == nil || *a.DefaultCoreFraction == *b.DefaultCoreFraction
}
