package launcher

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"
)

func TestStartFlags(t *testing.T) {
	paused, other := kubevirtv1.StartStrategyPaused, kubevirtv1.StartStrategy("Other")
	for _, tc := range []struct {
		name     string
		strategy *kubevirtv1.StartStrategy
		want     libvirt.DomainCreateFlags
	}{
		{"default", nil, libvirt.DOMAIN_NONE},
		{"paused", &paused, libvirt.DOMAIN_START_PAUSED},
		{"unknown strategy", &other, libvirt.DOMAIN_NONE},
	} {
		vmi := &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{StartStrategy: tc.strategy}}
		if got := startFlags(vmi); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
