package webhooks

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestValidateHostDisk(t *testing.T) {
	withHostDisk := func(hd kubevirtv1.HostDisk) func(*kubevirtv1.VirtualMachineInstanceSpec) {
		return func(s *kubevirtv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "host"})
			s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: "host", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &hd}})
		}
	}
	gi := resource.MustParse("1Gi")
	tests := []struct {
		name      string
		hd        kubevirtv1.HostDisk
		want      []string
		wantField string
		wantType  metav1.CauseType
	}{
		{name: "DiskOrCreate with capacity", hd: kubevirtv1.HostDisk{Path: "/srv/a.img", Type: kubevirtv1.HostDiskExistsOrCreate, Capacity: gi}},
		{name: "DiskOrCreate without capacity", hd: kubevirtv1.HostDisk{Path: "/srv/a.img", Type: kubevirtv1.HostDiskExistsOrCreate}},
		{name: "Disk", hd: kubevirtv1.HostDisk{Path: "/srv/a.img", Type: kubevirtv1.HostDiskExists}},
		{name: "no path", hd: kubevirtv1.HostDisk{Type: kubevirtv1.HostDiskExists},
			want: []string{"spec.volumes[1].hostDisk.path is required for hostDisk volume"}, wantField: "spec.volumes[1].hostDisk.path",
			wantType: metav1.CauseTypeFieldValueNotFound},
		{name: "unknown type", hd: kubevirtv1.HostDisk{Path: "/srv/a.img", Type: "File"},
			want:      []string{"spec.volumes[1].hostDisk.type has invalid value 'File', allowed are 'Disk' or 'DiskOrCreate'"},
			wantField: "spec.volumes[1].hostDisk.type", wantType: metav1.CauseTypeFieldValueInvalid},
		{name: "capacity for Disk", hd: kubevirtv1.HostDisk{Path: "/srv/a.img", Type: kubevirtv1.HostDiskExists, Capacity: gi},
			want:      []string{"spec.volumes[1].hostDisk.capacity is allowed to pass only with spec.volumes[1].hostDisk.type equal to 'DiskOrCreate'"},
			wantField: "spec.volumes[1].hostDisk.capacity", wantType: metav1.CauseTypeFieldValueInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := vmiSpec(withHostDisk(tt.hd))
			causes := ValidateVMISpec(field.NewPath("spec"), &spec)
			if got := messages(causes); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("messages %q, want %q", got, tt.want)
			}
			if tt.wantField != "" && (causes[0].Field != tt.wantField || causes[0].Type != tt.wantType) {
				t.Errorf("cause %+v, want field %q of type %s", causes[0], tt.wantField, tt.wantType)
			}
		})
	}
}
