package vmi

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/logopts"
)

func newVMI(mut ...func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: "demo", Namespace: "ns", UID: "vmi-uid",
			Labels:      map[string]string{"kubevirt.io/domain": "demo", kubevirtv1.CreatedByLabel: "vm-uid", "app": "web"},
			Annotations: map[string]string{"kubevirt.io/vm-generation": "1", lastAppliedAnnotation: "{}", "team": "a"},
		},
	}
	vmi.Spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	for _, m := range mut {
		m(vmi)
	}
	return vmi
}

func TestNewLauncherPodShape(t *testing.T) {
	vmi := newVMI(func(vmi *kubevirtv1.VirtualMachineInstance) {
		vmi.Spec.NodeSelector = map[string]string{"zone": "a", kubevirtv1.NodeSchedulable: "false"}
		vmi.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		vmi.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		vmi.Spec.Subdomain = "sub"
	})
	// The launcher logs as virt-controller does.
	pod := NewLauncherPod(vmi, LauncherConfig{Image: "launcher:v1", Log: logopts.Options{Level: "debug", Format: "text"}})

	if pod.GenerateName != "virt-launcher-demo-" || pod.Name != "" || pod.Namespace != "ns" {
		t.Errorf("naming %q %q %q", pod.GenerateName, pod.Name, pod.Namespace)
	}
	wantLabels := map[string]string{
		"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "vmi-uid", "vm.kubevirt.io/name": "demo", "vmi.kubevirt.io/id": "demo",
		"kubevirt.io/domain": "demo", "app": "web",
	}
	if !maps.Equal(pod.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", pod.Labels, wantLabels)
	}
	wantAnn := map[string]string{
		"kubevirt.io/domain": "demo", "kubectl.kubernetes.io/default-container": "compute",
		"kubevirt.io/migrationTransportUnix": "true", "team": "a",
	}
	if !maps.Equal(pod.Annotations, wantAnn) {
		t.Errorf("annotations %v, want %v", pod.Annotations, wantAnn)
	}
	if !metav1.IsControlledBy(pod, vmi) || pod.OwnerReferences[0].Kind != "VirtualMachineInstance" || pod.OwnerReferences[0].APIVersion != "kubevirt.io/v1" {
		t.Errorf("owner %+v", pod.OwnerReferences)
	}
	if len(pod.Spec.ReadinessGates) != 1 || pod.Spec.ReadinessGates[0].ConditionType != "kubevirt.io/virtual-machine-unpaused" {
		t.Errorf("readiness gates %+v", pod.Spec.ReadinessGates)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers %+v", pod.Spec.Containers)
	}
	c := pod.Spec.Containers[0]
	wantCmd := []string{"virt-launcher", "--name", "demo", "--namespace", "ns", "--uid", "vmi-uid", "--grace-period-seconds", "45",
		"--qemu-capabilities-dir", "/var/lib/kubevirt-qemu-capabilities", "--log-level=debug", "--log-format=text"}
	if c.Name != "compute" || c.Image != "launcher:v1" || !slices.Equal(c.Command, wantCmd) {
		t.Errorf("compute container %s %s %v", c.Name, c.Image, c.Command)
	}
	if got := *pod.Spec.TerminationGracePeriodSeconds; got != 60 {
		t.Errorf("pod grace %d, want 30+15+15", got)
	}
	wantSel := map[string]string{"zone": "a", "kubevirt.io/schedulable": "true"}
	if !maps.Equal(pod.Spec.NodeSelector, wantSel) {
		t.Errorf("node selector %v, want %v", pod.Spec.NodeSelector, wantSel)
	}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Affinity == nil || pod.Spec.Affinity == vmi.Spec.Affinity {
		t.Errorf("tolerations %v affinity %v (must be copies)", pod.Spec.Tolerations, pod.Spec.Affinity)
	}
	if pod.Spec.Hostname != "demo" || pod.Spec.Subdomain != "sub" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("hostname %q subdomain %q restart %q", pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.RestartPolicy)
	}
	if vmi.Labels[kubevirtv1.CreatedByLabel] != "vm-uid" || vmi.Spec.NodeSelector[kubevirtv1.NodeSchedulable] != "false" {
		t.Error("NewLauncherPod changed the VMI")
	}
}

func TestLauncherGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		vmi      *int64
		launcher string
		pod      int64
	}{
		{nil, "45", 60},
		{ptr(int64(0)), "15", 30},
		{ptr(int64(180)), "195", 210},
	} {
		pod := NewLauncherPod(newVMI(func(vmi *kubevirtv1.VirtualMachineInstance) { vmi.Spec.TerminationGracePeriodSeconds = tc.vmi }), LauncherConfig{Image: "img"})
		cmd := pod.Spec.Containers[0].Command
		if got := cmd[slices.Index(cmd, "--grace-period-seconds")+1]; got != tc.launcher || *pod.Spec.TerminationGracePeriodSeconds != tc.pod {
			t.Errorf("grace %v: launcher %s pod %d, want %s %d", tc.vmi, got, *pod.Spec.TerminationGracePeriodSeconds, tc.launcher, tc.pod)
		}
	}
}

func TestLauncherResources(t *testing.T) {
	no := false
	tests := []struct {
		name    string
		mut     func(*kubevirtv1.VirtualMachineInstance)
		wantMem string
		wantCPU string
		wantLim string
	}{
		// 1Gi + 220Mi fixed + 2Mi page tables + 8Mi one vCPU + 16Mi VGA.
		{"defaults", func(*kubevirtv1.VirtualMachineInstance) {}, "1270Mi", "100m", ""},
		{"four vCPUs, no graphics", func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Sockets: 2, Cores: 2}
			vmi.Spec.Domain.Devices.AutoattachGraphicsDevice = &no
		}, "1278Mi", "400m", ""},
		{"explicit CPU request and memory limit", func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Spec.Domain.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
			vmi.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, "1270Mi", "2", "1270Mi"},
		{"memory.guest only", func(vmi *kubevirtv1.VirtualMachineInstance) {
			g := resource.MustParse("512Mi")
			vmi.Spec.Domain.Resources.Requests = nil
			vmi.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: &g}
		}, "757Mi", "100m", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := NewLauncherPod(newVMI(tc.mut), LauncherConfig{Image: "img"}).Spec.Containers[0].Resources
			if got := res.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse(tc.wantMem)) != 0 {
				t.Errorf("memory request %s, want %s", got.String(), tc.wantMem)
			}
			if got := res.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tc.wantCPU)) != 0 {
				t.Errorf("cpu request %s, want %s", got.String(), tc.wantCPU)
			}
			got, ok := res.Limits[corev1.ResourceMemory]
			if tc.wantLim == "" && ok || tc.wantLim != "" && got.Cmp(resource.MustParse(tc.wantLim)) != 0 {
				t.Errorf("memory limit %s, want %q", got.String(), tc.wantLim)
			}
		})
	}
}

func TestHostname(t *testing.T) {
	long := "a2345678901234567890123456789012345678901234567890123456789012-45"
	for _, tc := range []struct{ name, hostname, want string }{
		{"demo", "", "demo"},
		{"demo", "guest", "guest"},
		{"my.vm", "", "my-vm"},
		{long, "", long[:62]},
	} {
		vmi := newVMI(func(vmi *kubevirtv1.VirtualMachineInstance) { vmi.Name, vmi.Spec.Hostname = tc.name, tc.hostname })
		if got := Hostname(vmi); got != tc.want {
			t.Errorf("Hostname(%q, %q) = %q, want %q", tc.name, tc.hostname, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestLauncherVolumes(t *testing.T) {
	cfg := LauncherConfig{Image: "img"}
	cases := []struct {
		name       string
		volumes    []kubevirtv1.Volume
		wantMounts map[string]string // volume -> mount path
		wantVols   int               // Pod volumes without a mount in the compute container
	}{
		{
			name:       "state and sockets only",
			wantMounts: map[string]string{"private": "/var/run/kubevirt-private", "public": "/var/run/kubevirt", "sockets": "/var/run/kubevirt/sockets"},
		},
		{
			name:    "containerDisk: its sockets, and the binary's share for the other containers",
			volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "disk:1"}}}},
			wantMounts: map[string]string{"private": "/var/run/kubevirt-private", "public": "/var/run/kubevirt", "sockets": "/var/run/kubevirt/sockets",
				"container-disks": "/var/run/kubevirt/container-disks"},
			wantVols: 1,
		},
		{
			name: "PVC under the launcher's volume dir",
			volumes: []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc-1"}},
			}}},
			wantMounts: map[string]string{"private": "/var/run/kubevirt-private", "public": "/var/run/kubevirt", "sockets": "/var/run/kubevirt/sockets",
				"data": "/var/run/kubevirt-private/vmi-disks/data"},
		},
		{
			name: "a hotpluggable PVC comes through an attachment pod, not the launcher's",
			volumes: []kubevirtv1.Volume{{Name: "hot", VolumeSource: kubevirtv1.VolumeSource{
				PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true,
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc-2"}},
			}}},
			wantMounts: map[string]string{"private": "/var/run/kubevirt-private", "public": "/var/run/kubevirt", "sockets": "/var/run/kubevirt/sockets"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Every launcher has the volume hotplugged disks are mounted into, and the node's QEMU
			// capabilities (read-only).
			c.wantMounts["hotplug-disks"] = "/var/run/kubevirt/hotplug-disks"
			c.wantMounts["qemu-capabilities"] = "/var/lib/kubevirt-qemu-capabilities"
			pod := NewLauncherPod(newVMI(func(v *kubevirtv1.VirtualMachineInstance) { v.Spec.Volumes = c.volumes }), cfg)
			got := map[string]string{}
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				got[m.Name] = m.MountPath
				if m.Name == "qemu-capabilities" && !m.ReadOnly {
					t.Error("the node's QEMU capabilities are mounted writable: one launcher could change another's")
				}
				if m.Name == "hotplug-disks" && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
					t.Errorf("hotplug-disks propagation %v, want HostToContainer", m.MountPropagation)
				}
			}
			if !maps.Equal(got, c.wantMounts) {
				t.Errorf("mounts = %v, want %v", got, c.wantMounts)
			}
			if len(pod.Spec.Volumes) != len(c.wantMounts)+c.wantVols {
				t.Errorf("%d volumes for %d mounts", len(pod.Spec.Volumes), len(c.wantMounts))
			}
			for _, v := range pod.Spec.Volumes {
				if v.Name == "qemu-capabilities" && (v.HostPath == nil || v.HostPath.Path != "/var/lib/d8-virtualization/qemu-capabilities") {
					t.Errorf("qemu-capabilities volume = %+v", v.VolumeSource)
				}
				if v.Name == "container-disks" && v.EmptyDir == nil {
					t.Errorf("container-disks volume = %+v", v.VolumeSource)
				}
				if v.Name == "data" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "pvc-1") {
					t.Errorf("PVC volume = %+v", v.VolumeSource)
				}
			}
		})
	}
}

// TestContainerDiskContainers: as KubeVirt, an init container copies container-disk from the
// launcher image, and each containerDisk volume gets a container of its image that serves the
// disk on its socket; the pull secrets go to the Pod, each once.
func TestContainerDiskContainers(t *testing.T) {
	cd := func(name, image, secret, path string) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{
			Image: image, ImagePullSecret: secret, Path: path, ImagePullPolicy: corev1.PullAlways}}}
	}
	vmi := newVMI(func(v *kubevirtv1.VirtualMachineInstance) {
		v.Spec.Volumes = []kubevirtv1.Volume{
			cd("root", "dvcr.example/cvi/os:latest", "dvcr-pull", ""),
			{Name: "data", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}},
			cd("iso", "dvcr.example/vi/ns/iso:latest", "dvcr-pull", "/disk/os.iso"),
			cd("other", "registry.example/tools:1", "other-pull", ""),
		}
	})
	pod := NewLauncherPod(vmi, LauncherConfig{Image: "launcher:1"})
	if got := pod.Spec.Containers[0].Name; got != "compute" {
		t.Fatalf("first container %q, want compute", got)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %+v", pod.Spec.InitContainers)
	}
	init := pod.Spec.InitContainers[0]
	if init.Name != "container-disk-binary" || init.Image != "launcher:1" ||
		!slices.Equal(init.Command, []string{"container-disk", "--copy-to", "/var/run/kubevirt-bin/container-disk"}) {
		t.Errorf("init container %+v", init)
	}
	want := []struct {
		name, image string
		cmd         []string
	}{
		{"volumeroot", "dvcr.example/cvi/os:latest", []string{"/var/run/kubevirt-bin/container-disk", "--socket", "/var/run/kubevirt/container-disks/root.sock"}},
		{"volumeiso", "dvcr.example/vi/ns/iso:latest", []string{"/var/run/kubevirt-bin/container-disk", "--socket", "/var/run/kubevirt/container-disks/iso.sock", "--disk-path", "/disk/os.iso"}},
		{"volumeother", "registry.example/tools:1", []string{"/var/run/kubevirt-bin/container-disk", "--socket", "/var/run/kubevirt/container-disks/other.sock"}},
	}
	disks := pod.Spec.Containers[1:]
	if len(disks) != len(want) {
		t.Fatalf("%d containerDisk containers, want %d", len(disks), len(want))
	}
	for i, w := range want {
		c := disks[i]
		if c.Name != w.name || c.Image != w.image || c.ImagePullPolicy != corev1.PullAlways || !slices.Equal(c.Command[:len(w.cmd)], w.cmd) {
			t.Errorf("container %d = %s %s %s %v, want %+v", i, c.Name, c.Image, c.ImagePullPolicy, c.Command, w)
		}
		mounts := map[string]bool{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name+":"+m.MountPath] = m.ReadOnly
		}
		if ro, ok := mounts["container-disks:/var/run/kubevirt/container-disks"]; !ok || ro {
			t.Errorf("container %s mounts %v: want container-disks writable", c.Name, mounts)
		}
		if ro, ok := mounts["virt-bin-share-dir:/var/run/kubevirt-bin"]; !ok || !ro {
			t.Errorf("container %s mounts %v: want the binary read-only", c.Name, mounts)
		}
	}
	if got := pod.Spec.ImagePullSecrets; !slices.Equal(got, []corev1.LocalObjectReference{{Name: "dvcr-pull"}, {Name: "other-pull"}}) {
		t.Errorf("imagePullSecrets %v", got)
	}
	// Without a containerDisk: neither the init container nor the volumes.
	plain := NewLauncherPod(newVMI(), LauncherConfig{Image: "launcher:1"})
	if len(plain.Spec.InitContainers) != 0 || len(plain.Spec.Containers) != 1 || plain.Spec.ImagePullSecrets != nil {
		t.Errorf("a VMI without containerDisks: %+v", plain.Spec)
	}
}
