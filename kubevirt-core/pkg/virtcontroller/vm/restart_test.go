package vm

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func templated(mut ...func(*kubevirtv1.VirtualMachineInstanceSpec)) *kubevirtv1.VirtualMachine {
	return vmWith(func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
		spec := &vm.Spec.Template.Spec
		spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
		spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "root"}}
		spec.Volumes = []kubevirtv1.Volume{claimVolume("root", "root-claim", false)}
		for _, m := range mut {
			m(spec)
		}
	})
}

func claimVolume(name, claim string, pluggable bool) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}, Hotpluggable: pluggable,
	}}}
}

func withVolume(v kubevirtv1.Volume) func(*kubevirtv1.VirtualMachineInstanceSpec) {
	return func(s *kubevirtv1.VirtualMachineInstanceSpec) {
		s.Volumes = append(s.Volumes, v)
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
	}
}

func TestRestartRequired(t *testing.T) {
	hot := withVolume(claimVolume("hot", "hot-claim", true))
	memory := func(q string) func(*kubevirtv1.VirtualMachineInstanceSpec) {
		return func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(q)
		}
	}
	for _, tc := range []struct {
		name    string
		started *kubevirtv1.VirtualMachine // the VM the VMI was made from; nil: no VMI
		legacy  bool                       // the VMI predates the annotation
		now     *kubevirtv1.VirtualMachine
		want    bool
	}{
		{name: "no VMI", now: templated(memory("1Gi"))},
		{name: "unchanged", started: templated(), now: templated()},
		{name: "memory changed", started: templated(), now: templated(memory("1Gi")), want: true},
		{name: "memory changed back", started: templated(), now: templated(memory("1Gi"), memory("128Mi"))},
		{name: "plain disk added", started: templated(), now: templated(withVolume(claimVolume("data", "data-claim", false))), want: true},
		{name: "plain disk removed", started: templated(), now: templated(func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Volumes, s.Domain.Devices.Disks = nil, nil
		}), want: true},
		{name: "hotplugged volume added", started: templated(), now: templated(hot)},
		{name: "hotplugged volume removed", started: templated(hot), now: templated()},
		{name: "hotplugged volume added and memory changed", started: templated(), now: templated(hot, memory("1Gi")), want: true},
		{name: "a VMI without the annotation gives no verdict", started: templated(), legacy: true, now: templated(memory("1Gi"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vmi *kubevirtv1.VirtualMachineInstance
			if tc.started != nil {
				vmi = NewVMI(tc.started)
				if tc.legacy {
					delete(vmi.Annotations, TemplateHashAnnotation)
				}
				// The webhooks default the VMI's spec: the verdict must not depend on it.
				vmi.Spec.Domain.Machine = &kubevirtv1.Machine{Type: "q35"}
			}
			if got := restartRequired(tc.now, vmi); got != tc.want {
				t.Fatalf("restartRequired = %v, want %v", got, tc.want)
			}
			var cond *kubevirtv1.VirtualMachineCondition
			for _, c := range Status(tc.now, vmi, kubevirtv1.RunStrategyAlways, Decision{}, now).Conditions {
				if c.Type == kubevirtv1.VirtualMachineRestartRequired {
					cond = &c
				}
			}
			if (cond != nil) != tc.want {
				t.Fatalf("RestartRequired condition %+v, want present %v", cond, tc.want)
			}
			if cond != nil && (cond.Status != corev1.ConditionTrue || cond.Message != restartRequiredMessage || cond.LastTransitionTime.IsZero()) {
				t.Errorf("condition %+v", cond)
			}
		})
	}
}

// The condition's transition time is kept while it holds, so the status does not churn.
func TestRestartRequiredConditionIsStable(t *testing.T) {
	vmi := NewVMI(templated())
	vm := templated(withVolume(claimVolume("data", "data-claim", false)))
	first := Status(vm, vmi, kubevirtv1.RunStrategyAlways, Decision{}, now)
	vm.Status = first
	second := Status(vm, vmi, kubevirtv1.RunStrategyAlways, Decision{}, now.Add(time.Minute))
	if !equalStatus(first, second) {
		t.Errorf("status changed with the clock alone:\n%+v\n%+v", first.Conditions, second.Conditions)
	}
}
