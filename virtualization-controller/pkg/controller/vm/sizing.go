package vm

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

// SizingErrors are the ways vm breaks the sizing policy of class for its cores, in the
// reference module's words: no policy for the cores, cores off the policy's step, a core
// fraction the policy does not list, memory or memory per core outside the range or off the step.
// A class without policies allows anything.
func SizingErrors(machine *v1alpha2.VirtualMachine, class *v1alpha3.VirtualMachineClass) field.ErrorList {
	if len(class.Spec.SizingPolicies) == 0 {
		return nil
	}
	cpu, mem := field.NewPath("spec", "cpu"), field.NewPath("spec", "memory", "size")
	cores := machine.Spec.CPU.Cores
	var p *v1alpha3.SizingPolicy
	for i := range class.Spec.SizingPolicies {
		c := class.Spec.SizingPolicies[i].Cores
		if c != nil && cores >= c.Min && cores <= c.Max {
			p = &class.Spec.SizingPolicies[i]
			break
		}
	}
	if p == nil {
		return field.ErrorList{field.Invalid(cpu.Child("cores"), cores,
			fmt.Sprintf("virtual machine %s has no valid size policy in vm class %s", machine.Name, class.Name))}
	}
	var errs field.ErrorList
	if p.Cores.Step > 0 && (cores-p.Cores.Min)%p.Cores.Step != 0 {
		lower := p.Cores.Min + (cores-p.Cores.Min)/p.Cores.Step*p.Cores.Step
		errs = append(errs, field.Invalid(cpu.Child("cores"), cores, fmt.Sprintf(
			"requested VM cores not in available values grid, nearest valid values [%d, %d]", lower, min(lower+p.Cores.Step, p.Cores.Max))))
	}
	if fraction := EffectiveCoreFraction(machine, class); len(p.CoreFractions) > 0 && !slices.Contains(p.CoreFractions, v1alpha3.CoreFractionValue(fraction)) {
		errs = append(errs, field.NotSupported(cpu.Child("coreFraction"), fraction, fractions(p.CoreFractions)))
	}
	if m := p.Memory; m != nil {
		size := machine.Spec.Memory.Size
		errs = append(errs, inRange(mem, size, m.MemoryMinMax, m.Step, "VM memory")...)
		if m.PerCore != nil && cores > 0 {
			perCore := *resource.NewQuantity(size.Value()/int64(cores), resource.BinarySI)
			errs = append(errs, inRange(mem, perCore, *m.PerCore, nil, "VM per core memory")...)
		}
	}
	return errs
}

func fractions(f []v1alpha3.CoreFractionValue) []string {
	s := make([]string, len(f))
	for i, v := range f {
		s[i] = string(v)
	}
	return s
}

// inRange checks v against r and, from r.Min, step.
func inRange(path *field.Path, v resource.Quantity, r v1alpha2.MemoryMinMax, step *resource.Quantity, what string) field.ErrorList {
	lo, hi := "0", "unlimited"
	if r.Min != nil {
		lo = r.Min.String()
	}
	if r.Max != nil {
		hi = r.Max.String()
	}
	switch {
	case r.Min != nil && v.Cmp(*r.Min) < 0:
		return field.ErrorList{field.Invalid(path, v.String(), fmt.Sprintf("requested %s (%s) lesser than valid minimum, available range [%s, %s]", what, v.String(), lo, hi))}
	case r.Max != nil && v.Cmp(*r.Max) > 0:
		return field.ErrorList{field.Invalid(path, v.String(), fmt.Sprintf("requested %s (%s) greater than valid maximum, available range [%s, %s]", what, v.String(), lo, hi))}
	}
	if step == nil || step.Value() <= 0 {
		return nil
	}
	base := int64(0)
	if r.Min != nil {
		base = r.Min.Value()
	}
	if off := (v.Value() - base) % step.Value(); off != 0 {
		lower := resource.NewQuantity(v.Value()-off, resource.BinarySI)
		upper := resource.NewQuantity(v.Value()-off+step.Value(), resource.BinarySI)
		return field.ErrorList{field.Invalid(path, v.String(), fmt.Sprintf("requested %s not in available values grid, nearest valid values [%s, %s]", what, lower, upper))}
	}
	return nil
}
