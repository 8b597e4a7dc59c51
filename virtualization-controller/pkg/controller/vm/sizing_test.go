package vm

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

func TestSizingErrors(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	def := v1alpha3.CoreFractionValue("50%")
	class := &v1alpha3.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "generic"},
		Spec: v1alpha3.VirtualMachineClassSpec{SizingPolicies: []v1alpha3.SizingPolicy{
			{
				SizingPolicyResources: v1alpha2.SizingPolicyResources{
					Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4},
					Memory: &v1alpha2.SizingPolicyMemory{MemoryMinMax: v1alpha2.MemoryMinMax{Min: q("256Mi"), Max: q("8Gi")}, Step: q("256Mi"),
						PerCore: &v1alpha2.MemoryMinMax{Min: q("128Mi"), Max: q("3Gi")}},
				},
				CoreFractions: []v1alpha3.CoreFractionValue{"5%", "50%", "100%"}, DefaultCoreFraction: &def,
			},
			{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 6, Max: 12, Step: 2}}},
		}},
	}
	for _, tc := range []struct {
		name     string
		cores    int
		fraction string
		memory   string
		want     string
	}{
		{name: "fits", cores: 2, fraction: "5%", memory: "1Gi"},
		{name: "the class's default fraction", cores: 2, memory: "1Gi"},
		{name: "no policy for the cores", cores: 5, memory: "1Gi", want: `spec.cpu.cores: Invalid value: 5: virtual machine vm has no valid size policy in vm class generic`},
		{name: "cores off the step", cores: 7, want: `spec.cpu.cores: Invalid value: 7: requested VM cores not in available values grid, nearest valid values [6, 8]`},
		{name: "a fraction the policy does not list", cores: 2, fraction: "25%", memory: "1Gi", want: `spec.cpu.coreFraction: Unsupported value: "25%": supported values: "5%", "50%", "100%"`},
		{name: "too little memory", cores: 1, memory: "128Mi", want: `spec.memory.size: Invalid value: "128Mi": requested VM memory (128Mi) lesser than valid minimum, available range [256Mi, 8Gi]`},
		{name: "too much memory", cores: 4, memory: "9Gi", want: `spec.memory.size: Invalid value: "9Gi": requested VM memory (9Gi) greater than valid maximum, available range [256Mi, 8Gi]`},
		{name: "memory off the step", cores: 1, memory: "300Mi", want: `spec.memory.size: Invalid value: "300Mi": requested VM memory not in available values grid, nearest valid values [256Mi, 512Mi]`},
		{name: "too much memory per core", cores: 1, memory: "4Gi", want: `spec.memory.size: Invalid value: "4Gi": requested VM per core memory (4Gi) greater than valid maximum, available range [128Mi, 3Gi]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}
			vm.Spec.CPU = v1alpha2.CPUSpec{Cores: tc.cores, CoreFraction: tc.fraction}
			if tc.memory != "" {
				vm.Spec.Memory.Size = resource.MustParse(tc.memory)
			}
			errs := SizingErrors(vm, class)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("errors %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Fatalf("errors %v\nwant %q", errs, tc.want)
			}
		})
	}
	if errs := SizingErrors(&v1alpha2.VirtualMachine{}, &v1alpha3.VirtualMachineClass{}); len(errs) != 0 {
		t.Fatalf("a class without policies: %v", errs)
	}
}
