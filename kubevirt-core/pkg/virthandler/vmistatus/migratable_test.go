package vmistatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestLiveMigratable(t *testing.T) {
	claim := func(name string, modes ...corev1.PersistentVolumeAccessMode) func(*kubevirtv1.VirtualMachineInstance) {
		return func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim-" + name}}}})
			if modes != nil {
				vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: name,
					PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "claim-" + name, AccessModes: modes}})
			}
		}
	}
	iface := func(bridge bool) func(*kubevirtv1.VirtualMachineInstance) {
		return func(vmi *kubevirtv1.VirtualMachineInstance) {
			i := kubevirtv1.Interface{Name: "default"}
			if bridge {
				i.Bridge = &kubevirtv1.InterfaceBridge{}
			} else {
				i.Masquerade = &kubevirtv1.InterfaceMasquerade{}
			}
			vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{i}
			vmi.Spec.Networks = []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
		}
	}
	shared := true
	for _, tc := range []struct {
		name   string
		mut    []func(*kubevirtv1.VirtualMachineInstance)
		reason string
		msg    string
	}{
		{name: "containerDisk and masquerade", mut: []func(*kubevirtv1.VirtualMachineInstance){iface(false), func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "x"}}}}
		}}},
		{name: "a shared claim", mut: []func(*kubevirtv1.VirtualMachineInstance){claim("root", corev1.ReadWriteOnce, corev1.ReadWriteMany)}},
		{name: "a claim of one node", mut: []func(*kubevirtv1.VirtualMachineInstance){claim("root", corev1.ReadWriteMany), claim("data", corev1.ReadWriteOnce)},
			reason: "DisksNotLiveMigratable",
			msg:    "cannot migrate VMI: PVC claim-data is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"},
		{name: "a claim not recorded yet", mut: []func(*kubevirtv1.VirtualMachineInstance){claim("root")}, reason: "DisksNotLiveMigratable",
			msg: "cannot migrate VMI: PVC claim-root is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"},
		{name: "a host disk", mut: []func(*kubevirtv1.VirtualMachineInstance){func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []kubevirtv1.Volume{{Name: "h", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: "/x"}}}}
		}}, reason: "DisksNotLiveMigratable", msg: "cannot migrate VMI with non-shared HostDisk"},
		{name: "a shared host disk", mut: []func(*kubevirtv1.VirtualMachineInstance){func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []kubevirtv1.Volume{{Name: "h", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: "/x", Shared: &shared}}}}
		}}},
		{name: "a bridge on the pod network", mut: []func(*kubevirtv1.VirtualMachineInstance){iface(true)}, reason: "InterfaceNotLiveMigratable",
			msg: "cannot migrate VMI which does not use masquerade, bridge with kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin to connect to the pod network"},
		{name: "a bridge allowed by annotation", mut: []func(*kubevirtv1.VirtualMachineInstance){iface(true), func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Annotations = map[string]string{AllowPodBridgeMigration: "true"}
		}}},
		{name: "disks come first", mut: []func(*kubevirtv1.VirtualMachineInstance){iface(true), claim("root", corev1.ReadWriteOnce)}, reason: "DisksNotLiveMigratable",
			msg: "cannot migrate VMI: PVC claim-root is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"},
		{name: "a host device", mut: []func(*kubevirtv1.VirtualMachineInstance){func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.HostDevices = []kubevirtv1.HostDevice{{Name: "d", DeviceName: "vendor/dev"}}
		}}, reason: "HostDeviceNotLiveMigratable", msg: "VMI uses a PCI host devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			for _, m := range tc.mut {
				m(vmi)
			}
			c := LiveMigratable(vmi)
			want := corev1.ConditionTrue
			if tc.reason != "" {
				want = corev1.ConditionFalse
			}
			if c.Type != kubevirtv1.VirtualMachineInstanceIsMigratable || c.Status != want || c.Reason != tc.reason || c.Message != tc.msg {
				t.Errorf("got %+v, want %s %q %q", c, want, tc.reason, tc.msg)
			}
		})
	}
}
