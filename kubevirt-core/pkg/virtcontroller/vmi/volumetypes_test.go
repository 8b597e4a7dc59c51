package vmi

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func claimVolume(name, claim string) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
}

func claimStatus(name string, mode corev1.PersistentVolumeMode) kubevirtv1.VolumeStatus {
	return kubevirtv1.VolumeStatus{Name: name, PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: name, VolumeMode: &mode}}
}

// TestLauncherVolumeTypes checks how block claims and hostDisks reach the compute container, by
// the Pod entries of the volumes in question only.
func TestLauncherVolumeTypes(t *testing.T) {
	hostDisk := func(name, path string, typ kubevirtv1.HostDiskType) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{
			Path: path, Type: typ, Capacity: resource.MustParse("1Gi")}}}
	}
	dir, dirOrCreate := corev1.HostPathDirectory, corev1.HostPathDirectoryOrCreate
	volume := func(name string, src kubevirtv1.VolumeSource) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: src}
	}
	ephemeral := func(name, claim string) kubevirtv1.Volume {
		return volume(name, kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
	optional := true
	items := []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}
	cases := []struct {
		name        string
		volumes     []kubevirtv1.Volume
		disks       []string
		status      []kubevirtv1.VolumeStatus
		wantVolumes []corev1.Volume
		wantMounts  []corev1.VolumeMount
		wantDevices []corev1.VolumeDevice
		wantAccount string
	}{
		{
			name:    "block claim is a device at /dev/<volume>",
			volumes: []kubevirtv1.Volume{claimVolume("blk", "pvc-b")},
			status:  []kubevirtv1.VolumeStatus{claimStatus("blk", corev1.PersistentVolumeBlock)},
			wantVolumes: []corev1.Volume{{Name: "blk", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc-b"}}}},
			wantDevices: []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/blk"}},
		},
		{
			name:    "filesystem claim stays a mount",
			volumes: []kubevirtv1.Volume{claimVolume("data", "pvc-d")},
			status:  []kubevirtv1.VolumeStatus{claimStatus("data", corev1.PersistentVolumeFilesystem)},
			wantVolumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc-d"}}}},
			wantMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/run/kubevirt-private/vmi-disks/data"}},
		},
		{
			name: "hostDisk mounts its directory",
			volumes: []kubevirtv1.Volume{hostDisk("h1", "/srv/vms/a.img", kubevirtv1.HostDiskExistsOrCreate),
				hostDisk("h2", "/data/b.img", kubevirtv1.HostDiskExists)},
			wantVolumes: []corev1.Volume{
				{Name: "h1", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/vms", Type: &dirOrCreate}}},
				{Name: "h2", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data", Type: &dir}}},
			},
			wantMounts: []corev1.VolumeMount{
				{Name: "h1", MountPath: "/var/run/kubevirt-private/vmi-disks/h1"},
				{Name: "h2", MountPath: "/var/run/kubevirt-private/vmi-disks/h2"},
			},
		},
		{
			name:        "ephemeral claim: read-only, a mount like a claim's",
			volumes:     []kubevirtv1.Volume{ephemeral("eph", "golden")},
			status:      []kubevirtv1.VolumeStatus{claimStatus("eph", corev1.PersistentVolumeFilesystem)},
			wantVolumes: []corev1.Volume{{Name: "eph", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden", ReadOnly: true}}}},
			wantMounts:  []corev1.VolumeMount{{Name: "eph", MountPath: "/var/run/kubevirt-private/vmi-disks/eph"}},
		},
		{
			name:        "ephemeral block claim: a device",
			volumes:     []kubevirtv1.Volume{ephemeral("eph", "golden")},
			status:      []kubevirtv1.VolumeStatus{claimStatus("eph", corev1.PersistentVolumeBlock)},
			wantVolumes: []corev1.Volume{{Name: "eph", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden", ReadOnly: true}}}},
			wantDevices: []corev1.VolumeDevice{{Name: "eph", DevicePath: "/dev/eph"}},
		},
		{
			name: "config volumes with disks: mounted read-only where the launcher reads them",
			volumes: []kubevirtv1.Volume{
				volume("cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Optional: &optional, VolumeLabel: "CFG"}}),
				volume("sec", kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "creds"}}),
				volume("dapi", kubevirtv1.VolumeSource{DownwardAPI: &kubevirtv1.DownwardAPIVolumeSource{Fields: items}}),
				volume("unattend", kubevirtv1.VolumeSource{Sysprep: &kubevirtv1.SysprepSource{Secret: &corev1.LocalObjectReference{Name: "answers"}}}),
				volume("unattend2", kubevirtv1.VolumeSource{Sysprep: &kubevirtv1.SysprepSource{ConfigMap: &corev1.LocalObjectReference{Name: "answers2"}}}),
			},
			disks: []string{"cm", "sec", "dapi", "unattend", "unattend2"},
			wantVolumes: []corev1.Volume{
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Optional: &optional}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}},
				{Name: "unattend", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "answers"}}},
				{Name: "unattend2", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "answers2"}}}},
			},
			wantMounts: []corev1.VolumeMount{
				{Name: "cm", MountPath: "/var/run/kubevirt-private/config-map/cm", ReadOnly: true},
				{Name: "sec", MountPath: "/var/run/kubevirt-private/secret/sec", ReadOnly: true},
				{Name: "dapi", MountPath: "/var/run/kubevirt-private/downwardapi/dapi", ReadOnly: true},
				{Name: "unattend", MountPath: "/var/run/kubevirt-private/sysprep/unattend", ReadOnly: true},
				{Name: "unattend2", MountPath: "/var/run/kubevirt-private/sysprep/unattend2", ReadOnly: true},
			},
		},
		{
			name:    "config volume without a disk: nothing",
			volumes: []kubevirtv1.Volume{volume("cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}})},
		},
		{
			name:        "serviceAccount: the Pod runs under it, its token mounted",
			volumes:     []kubevirtv1.Volume{volume("sa", kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "guest-reader"}})},
			disks:       []string{"sa"},
			wantAccount: "guest-reader",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := NewLauncherPod(newVMI(func(v *kubevirtv1.VirtualMachineInstance) {
				v.Spec.Volumes = c.volumes
				for _, d := range c.disks {
					v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: d})
				}
				v.Status.VolumeStatus = c.status
			}), LauncherConfig{Image: "img"})
			ours := map[string]bool{}
			for _, v := range c.volumes {
				ours[v.Name] = true
			}
			var vols []corev1.Volume
			for _, v := range pod.Spec.Volumes {
				if ours[v.Name] {
					vols = append(vols, v)
				}
			}
			var mounts []corev1.VolumeMount
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				if ours[m.Name] {
					mounts = append(mounts, m)
				}
			}
			if !reflect.DeepEqual(vols, c.wantVolumes) {
				t.Errorf("volumes %+v, want %+v", vols, c.wantVolumes)
			}
			if !reflect.DeepEqual(mounts, c.wantMounts) {
				t.Errorf("mounts %+v, want %+v", mounts, c.wantMounts)
			}
			if got := pod.Spec.Containers[0].VolumeDevices; !reflect.DeepEqual(got, c.wantDevices) {
				t.Errorf("devices %+v, want %+v", got, c.wantDevices)
			}
			if got, automount := pod.Spec.ServiceAccountName, *pod.Spec.AutomountServiceAccountToken; got != c.wantAccount || automount != (c.wantAccount != "") {
				t.Errorf("service account %q, automount %v; want %q", got, automount, c.wantAccount)
			}
		})
	}
}

// TestReconcileBlockClaimDevice checks that the first launcher Pod of a VMI already holds its
// block claim as a device, though the VMI's status records the claim only with that reconcile.
func TestReconcileBlockClaimDevice(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	vmi := newVMI(func(v *kubevirtv1.VirtualMachineInstance) {
		v.Spec.Volumes = []kubevirtv1.Volume{claimVolume("blk", "raw")}
	})
	block := corev1.PersistentVolumeBlock
	pvc := claim("raw", boundWith("1Gi"), func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeMode = &block })
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(vmi, pvc).Build()
	r := NewReconciler(c, c, LauncherConfig{Image: "launcher"}, clocktesting.NewFakePassiveClock(now), &events.FakeRecorder{})
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}}); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(vmi.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d launcher pods, want one", len(pods.Items))
	}
	want := []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/blk"}}
	if got := pods.Items[0].Spec.Containers[0].VolumeDevices; !reflect.DeepEqual(got, want) {
		t.Errorf("devices %+v, want %+v", got, want)
	}
}
