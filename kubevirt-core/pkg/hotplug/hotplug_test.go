package hotplug

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func pvcVolume(name, claim string, pluggable bool) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		Hotpluggable: pluggable, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}}
}

func addReq(name, claim string) kubevirtv1.VirtualMachineVolumeRequest {
	return kubevirtv1.VirtualMachineVolumeRequest{AddVolumeOptions: &kubevirtv1.AddVolumeOptions{
		Name: name,
		Disk: &kubevirtv1.Disk{Name: name, Serial: "s-" + name},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}, Hotpluggable: true,
		}},
	}}
}

func removeReq(name string) kubevirtv1.VirtualMachineVolumeRequest {
	return kubevirtv1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &kubevirtv1.RemoveVolumeOptions{Name: name}}
}

func TestVerify(t *testing.T) {
	volumes := []kubevirtv1.Volume{
		{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img"}}},
		pvcVolume("data", "data-claim", false),
		pvcVolume("hot", "hot-claim", true),
	}
	for _, tc := range []struct {
		name string
		req  kubevirtv1.VirtualMachineVolumeRequest
		want string
	}{
		{"add a new volume", addReq("new", "new-claim"), ""},
		{"add a taken name", addReq("data", "other"), "Unable to add volume [data] because volume with that name already exists"},
		{"add a claim in use", addReq("other", "hot-claim"), "Unable to add volume source [hot-claim] because it already exists"},
		{"remove a hotplugged volume", removeReq("hot"), ""},
		{"remove by claim name", removeReq("hot-claim"), ""},
		{"remove a volume of the spec", removeReq("data"), "Unable to remove volume [data] because it is not hotpluggable"},
		{"remove a containerDisk", removeReq("root"), "Unable to remove volume [root] because it is not hotpluggable"},
		{"remove what is not there", removeReq("nope"), "Unable to remove volume [nope] because it does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(volumes, &tc.req)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Verify = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQueue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending []kubevirtv1.VirtualMachineVolumeRequest
		req     kubevirtv1.VirtualMachineVolumeRequest
		want    []kubevirtv1.VirtualMachineVolumeRequest
		err     string
	}{
		{name: "first request", req: addReq("a", "ca"), want: []kubevirtv1.VirtualMachineVolumeRequest{addReq("a", "ca")}},
		{name: "second volume", pending: []kubevirtv1.VirtualMachineVolumeRequest{addReq("a", "ca")}, req: addReq("b", "cb"),
			want: []kubevirtv1.VirtualMachineVolumeRequest{addReq("a", "ca"), addReq("b", "cb")}},
		{name: "add twice", pending: []kubevirtv1.VirtualMachineVolumeRequest{addReq("a", "ca")}, req: addReq("a", "ca"),
			err: "add volume request for volume [a] already exists"},
		{name: "add while removing", pending: []kubevirtv1.VirtualMachineVolumeRequest{removeReq("a")}, req: addReq("a", "ca"),
			err: "unable to add volume since a remove volume request for volume [a] already exists and is still being processed"},
		{name: "remove drops a pending add", pending: []kubevirtv1.VirtualMachineVolumeRequest{addReq("a", "ca"), addReq("b", "cb")}, req: removeReq("a"),
			want: []kubevirtv1.VirtualMachineVolumeRequest{addReq("b", "cb"), removeReq("a")}},
		{name: "remove twice", pending: []kubevirtv1.VirtualMachineVolumeRequest{removeReq("a")}, req: removeReq("a"),
			err: "a remove volume request for volume [a] already exists and is still being processed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Queue(tc.pending, tc.req)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Queue error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Queue = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	base := func() *kubevirtv1.VirtualMachineInstanceSpec {
		return &kubevirtv1.VirtualMachineInstanceSpec{
			Domain:  kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{{Name: "root"}}}},
			Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img"}}}},
		}
	}
	added := func() *kubevirtv1.VirtualMachineInstanceSpec {
		s := base()
		s.Volumes = append(s.Volumes, pvcVolume("hot", "hot-claim", true))
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: "hot", Serial: "s-hot"})
		return s
	}
	for _, tc := range []struct {
		name        string
		spec        *kubevirtv1.VirtualMachineInstanceSpec
		req         kubevirtv1.VirtualMachineVolumeRequest
		want        *kubevirtv1.VirtualMachineInstanceSpec
		wantChanged bool
	}{
		{"add puts volume and disk in", base(), addReq("hot", "hot-claim"), added(), true},
		{"add again changes nothing", added(), addReq("hot", "hot-claim"), added(), false},
		{"remove takes both out", added(), removeReq("hot"), base(), true},
		{"remove by claim name", added(), removeReq("hot-claim"), base(), true},
		{"remove again changes nothing", base(), removeReq("hot"), base(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := Apply(tc.spec, &tc.req)
			if changed != tc.wantChanged || !equality.Semantic.DeepEqual(tc.spec, tc.want) {
				t.Errorf("Apply = %v, %+v; want %v, %+v", changed, tc.spec, tc.wantChanged, tc.want)
			}
		})
	}
}
