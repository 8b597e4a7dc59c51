package vmistatus

import (
	"maps"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

func TestAnnotations(t *testing.T) {
	both := &launcherapi.Versions{QEMU: "9.2.0", Libvirt: "10.10.0"}
	for _, tc := range []struct {
		name string
		have map[string]string
		dom  *launcherapi.DomainStatus
		want map[string]string
	}{
		{"launcher not reached", map[string]string{"a": "b"}, nil, map[string]string{"a": "b"}},
		{"no versions reported", nil, &launcherapi.DomainStatus{}, nil},
		{"versions added next to the others", map[string]string{"a": "b"}, &launcherapi.DomainStatus{Versions: both},
			map[string]string{"a": "b", launcherapi.AnnotationQEMUVersion: "9.2.0", launcherapi.AnnotationLibvirtVersion: "10.10.0"}},
		{"versions on a VMI without annotations", nil, &launcherapi.DomainStatus{Versions: both},
			map[string]string{launcherapi.AnnotationQEMUVersion: "9.2.0", launcherapi.AnnotationLibvirtVersion: "10.10.0"}},
		{"a new launcher's versions replace the old", map[string]string{launcherapi.AnnotationQEMUVersion: "8.0.0", launcherapi.AnnotationLibvirtVersion: "9.0.0"},
			&launcherapi.DomainStatus{Versions: both}, map[string]string{launcherapi.AnnotationQEMUVersion: "9.2.0", launcherapi.AnnotationLibvirtVersion: "10.10.0"}},
		{"an empty version leaves the old", map[string]string{launcherapi.AnnotationQEMUVersion: "8.0.0"},
			&launcherapi.DomainStatus{Versions: &launcherapi.Versions{Libvirt: "10.10.0"}}, map[string]string{launcherapi.AnnotationQEMUVersion: "8.0.0", launcherapi.AnnotationLibvirtVersion: "10.10.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			vmi.Annotations = maps.Clone(tc.have)
			got := Annotations(vmi, tc.dom)
			if !maps.Equal(got, tc.want) {
				t.Errorf("annotations %v, want %v", got, tc.want)
			}
			if !maps.Equal(vmi.Annotations, tc.have) {
				t.Errorf("the VMI's own annotations changed to %v", vmi.Annotations)
			}
		})
	}
}
