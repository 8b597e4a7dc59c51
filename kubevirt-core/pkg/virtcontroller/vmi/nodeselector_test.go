package vmi

import (
	"maps"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestLauncherNodeSelector(t *testing.T) {
	const model, feature, schedulable = "cpu-model.node.kubevirt.io/", "cpu-feature.node.kubevirt.io/", "kubevirt.io/schedulable"
	for _, tc := range []struct {
		name string
		sel  map[string]string
		cpu  *kubevirtv1.CPU
		want map[string]string
	}{
		{name: "no cpu", sel: map[string]string{"zone": "a"}, want: map[string]string{"zone": "a", schedulable: "true"}},
		{name: "host-model asks for no model", cpu: &kubevirtv1.CPU{Model: "host-model"}, want: map[string]string{schedulable: "true"}},
		{name: "host-passthrough", cpu: &kubevirtv1.CPU{Model: "host-passthrough"}, want: map[string]string{schedulable: "true"}},
		{name: "a named model", cpu: &kubevirtv1.CPU{Model: "Westmere"}, want: map[string]string{model + "Westmere": "true", schedulable: "true"}},
		{name: "the generic baseline with required features", cpu: &kubevirtv1.CPU{Model: "kvm64", Features: []kubevirtv1.CPUFeature{
			{Name: "sse4.2", Policy: "require"}, {Name: "avx"}, {Name: "vmx", Policy: "disable"}, {Name: "pcid", Policy: "optional"},
		}}, want: map[string]string{feature + "sse4.2": "true", feature + "avx": "true", schedulable: "true"}},
		{name: "qemu64", cpu: &kubevirtv1.CPU{Model: "qemu64"}, want: map[string]string{schedulable: "true"}},
		{name: "the VMI cannot turn schedulable off", sel: map[string]string{schedulable: "false"}, want: map[string]string{schedulable: "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := newVMI(func(vmi *kubevirtv1.VirtualMachineInstance) {
				vmi.Spec.NodeSelector = tc.sel
				vmi.Spec.Domain.CPU = tc.cpu
			})
			if got := launcherNodeSelector(vmi); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
