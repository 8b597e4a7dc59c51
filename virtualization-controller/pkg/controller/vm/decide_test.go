package vm

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

func intPtr(i int) *int { return &i }

func friendlyVM() *v1alpha2.VirtualMachine {
	return &v1alpha2.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1alpha2.VirtualMachineSpec{
			VirtualMachineClassName: "generic",
			CPU:                     v1alpha2.CPUSpec{Cores: 2, CoreFraction: "25%"},
			Memory:                  v1alpha2.MemorySpec{Size: resource.MustParse("1Gi")},
			BlockDeviceRefs: []v1alpha2.BlockDeviceSpecRef{
				{Kind: KindVirtualDisk, Name: "root"},
				{Kind: KindClusterVirtualImage, Name: "iso", BootOrder: intPtr(1)},
			},
			NodeSelector: map[string]string{"zone": "a"},
			Tolerations:  []corev1.Toleration{{Key: "vm", Operator: corev1.TolerationOpExists}},
		},
	}
}

func class(cpu v1alpha2.CPU) *v1alpha3.VirtualMachineClass {
	return &v1alpha3.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "generic"},
		Spec: v1alpha3.VirtualMachineClassSpec{
			CPU: cpu,
			NodeSelector: v1alpha2.NodeSelector{
				MatchLabels:      map[string]string{"zone": "b", "virt": "yes"},
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist}},
			},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		},
	}
}

func devices() []Device {
	return []Device{
		{Ref: v1alpha2.BlockDeviceSpecRef{Kind: KindVirtualDisk, Name: "root"}, Ready: true, ClaimName: "vd-root-pvc"},
		{Ref: v1alpha2.BlockDeviceSpecRef{Kind: KindClusterVirtualImage, Name: "iso", BootOrder: intPtr(1)}, Ready: true, Image: "dvcr.d8v.svc/cvi/iso:latest", ReadOnly: true, CDROM: true},
	}
}

func TestBuild(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*v1alpha2.VirtualMachine)
		class *v1alpha3.VirtualMachineClass
		ip    string
		check func(t *testing.T, out *kubevirtv1.VirtualMachine)
	}{
		{name: "identity and run strategy", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
			if out.Name != "web" || out.Namespace != "ns" || *out.Spec.RunStrategy != kubevirtv1.RunStrategyManual {
				t.Errorf("name %s/%s strategy %s", out.Namespace, out.Name, *out.Spec.RunStrategy)
			}
			if o := out.OwnerReferences; len(o) != 1 || o[0].UID != "u1" || o[0].Kind != "VirtualMachine" || o[0].APIVersion != "virtualization.deckhouse.io/v1alpha2" || !*o[0].Controller {
				t.Errorf("owner %+v", o)
			}
			if out.Spec.Template.ObjectMeta.Annotations[AnnotationAppliedSpec] == "" {
				t.Error("no applied spec")
			}
			if _, ok := out.Spec.Template.ObjectMeta.Annotations[AnnotationIPAddress]; ok {
				t.Error("an address without a VMIP")
			}
		}},
		{name: "cpu, core fraction, memory", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
			d := out.Spec.Template.Spec.Domain
			if d.CPU.Cores != 2 || d.CPU.Sockets != 1 || d.CPU.Model != kubevirtv1.CPUModeHostModel {
				t.Errorf("cpu %+v", d.CPU)
			}
			req, lim := d.Resources.Requests[corev1.ResourceCPU], d.Resources.Limits[corev1.ResourceCPU]
			if req.String() != "500m" || lim.String() != "2" {
				t.Errorf("cpu request %s limit %s, want 500m and 2", req.String(), lim.String())
			}
			if d.Memory.Guest.String() != "1Gi" {
				t.Errorf("memory %s", d.Memory.Guest)
			}
		}},
		{name: "model with features", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeModel, Model: "Nehalem", Features: []string{"avx"}}), check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
			c := out.Spec.Template.Spec.Domain.CPU
			if c.Model != "Nehalem" || len(c.Features) != 1 || c.Features[0] != (kubevirtv1.CPUFeature{Name: "avx", Policy: "require"}) {
				t.Errorf("cpu %+v", c)
			}
		}},
		{name: "discovered features", class: func() *v1alpha3.VirtualMachineClass {
			c := class(v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery})
			c.Status.CPUFeatures.Enabled = []string{"sse4.2", "vmx"}
			return c
		}(), check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
			c := out.Spec.Template.Spec.Domain.CPU
			want := []kubevirtv1.CPUFeature{{Name: "sse4.2", Policy: "require"}, {Name: "vmx", Policy: "require"}}
			if c.Model != "kvm64" || !equality.Semantic.DeepEqual(c.Features, want) {
				t.Errorf("cpu %+v", c)
			}
		}},
		{name: "placement merged with the class", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
			s := out.Spec.Template.Spec
			if s.NodeSelector["zone"] != "a" || s.NodeSelector["virt"] != "yes" {
				t.Errorf("node selector %v", s.NodeSelector)
			}
			if len(s.Tolerations) != 2 || s.Tolerations[0].Key != "dedicated" || s.Tolerations[1].Key != "vm" {
				t.Errorf("tolerations %+v", s.Tolerations)
			}
			terms := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "gpu" {
				t.Errorf("node affinity %+v", terms)
			}
		}},
		{name: "disks, cd-rom, boot order", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
			s := out.Spec.Template.Spec
			disks, vols := s.Domain.Devices.Disks, s.Volumes
			if len(disks) != 2 || disks[0].Name != "vd-root" || *disks[0].BootOrder != 2 || disks[0].Disk.Bus != kubevirtv1.DiskBusVirtio {
				t.Fatalf("disks %+v", disks)
			}
			if disks[1].Name != "cvi-iso" || *disks[1].BootOrder != 1 || disks[1].CDRom == nil {
				t.Errorf("cd-rom %+v", disks[1])
			}
			if vols[0].PersistentVolumeClaim.ClaimName != "vd-root-pvc" || vols[1].ContainerDisk.Image != "dvcr.d8v.svc/cvi/iso:latest" {
				t.Errorf("volumes %+v", vols)
			}
			if len(s.Networks) != 1 || s.Networks[0].Pod == nil || s.Domain.Devices.Interfaces[0].Masquerade == nil {
				t.Errorf("network %+v", s.Networks)
			}
		}},
		{name: "inline cloud-init, no paravirtualization, EFI, the VMIP's address", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), ip: "10.66.10.3",
			edit: func(vm *v1alpha2.VirtualMachine) {
				off := false
				vm.Spec.EnableParavirtualization = &off
				vm.Spec.Bootloader = v1alpha2.EFI
				vm.Spec.Provisioning = &v1alpha2.Provisioning{Type: v1alpha2.ProvisioningTypeUserData, UserData: "#cloud-config\n"}
			},
			check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
				s := out.Spec.Template.Spec
				last := s.Volumes[len(s.Volumes)-1]
				if last.CloudInitNoCloud == nil || last.CloudInitNoCloud.UserData != "#cloud-config\n" {
					t.Errorf("cloud-init %+v", last)
				}
				if s.Domain.Devices.Disks[0].Disk.Bus != kubevirtv1.DiskBusSATA || s.Domain.Devices.Interfaces[0].Model != "e1000" {
					t.Errorf("devices %+v", s.Domain.Devices)
				}
				if s.Domain.Firmware.Bootloader.EFI == nil || *s.Domain.Firmware.Bootloader.EFI.SecureBoot {
					t.Errorf("firmware %+v", s.Domain.Firmware)
				}
				if out.Spec.Template.ObjectMeta.Annotations[AnnotationIPAddress] != "10.66.10.3" {
					t.Errorf("annotations %v", out.Spec.Template.ObjectMeta.Annotations)
				}
			}},
		{name: "cloud-init from a Secret", class: class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}),
			edit: func(vm *v1alpha2.VirtualMachine) {
				vm.Spec.Provisioning = &v1alpha2.Provisioning{Type: v1alpha2.ProvisioningTypeUserDataRef, UserDataRef: &v1alpha2.UserDataRef{Kind: "Secret", Name: "ci"}}
			},
			check: func(t *testing.T, out *kubevirtv1.VirtualMachine) {
				s := out.Spec.Template.Spec
				if ref := s.Volumes[len(s.Volumes)-1].CloudInitNoCloud.UserDataSecretRef; ref == nil || ref.Name != "ci" {
					t.Errorf("secret ref %+v", ref)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := friendlyVM()
			if tc.edit != nil {
				tc.edit(vm)
			}
			out, err := Build(Inputs{VM: vm, Class: tc.class, Devices: devices(), IPAddress: tc.ip})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

// An image kept on a claim is a read-only disk of the internal VM, as its claim is read-only; an
// image in DVCR is a writable disk over its container disk, a disk a writable one.
func TestReadOnlyDisks(t *testing.T) {
	vm := &v1alpha2.VirtualMachine{}
	disks := buildDisks(Inputs{VM: vm, Devices: []Device{
		{Ref: v1alpha2.BlockDeviceSpecRef{Kind: KindVirtualImage, Name: "on-claim"}, Ready: true, ClaimName: "vi-on-claim", ReadOnly: true},
		{Ref: v1alpha2.BlockDeviceSpecRef{Kind: KindClusterVirtualImage, Name: "in-dvcr"}, Ready: true, Image: "dvcr/cvi/in-dvcr:latest", ReadOnly: true},
		{Ref: v1alpha2.BlockDeviceSpecRef{Kind: KindVirtualDisk, Name: "root"}, Ready: true, ClaimName: "vd-root"},
	}}, true)
	want := map[string]bool{"vi-on-claim": true, "cvi-in-dvcr": false, "vd-root": false}
	for _, d := range disks {
		if d.Disk == nil || d.Disk.ReadOnly != want[d.Name] {
			t.Errorf("%s: %+v, want read-only %t", d.Name, d.Disk, want[d.Name])
		}
	}
	if len(disks) != 3 {
		t.Fatalf("%d disks", len(disks))
	}
}

func TestCoreFractionAndTopology(t *testing.T) {
	def := v1alpha3.CoreFractionValue("10%")
	c := class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost})
	c.Spec.SizingPolicies = []v1alpha3.SizingPolicy{{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}}, DefaultCoreFraction: &def}}
	vm := friendlyVM()
	vm.Spec.CPU.CoreFraction = ""
	if got := EffectiveCoreFraction(vm, c); got != "10%" {
		t.Errorf("from the class: %s", got)
	}
	vm.Spec.CPU.Cores = 8
	if got := EffectiveCoreFraction(vm, c); got != "100%" {
		t.Errorf("outside the policy: %s", got)
	}
	for _, bad := range []string{"0%", "101%", "5", "x%"} {
		if _, err := ParseCoreFraction(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for cores, want := range map[int]v1alpha2.Topology{1: {Sockets: 1, CoresPerSocket: 1}, 16: {Sockets: 1, CoresPerSocket: 16}, 18: {Sockets: 2, CoresPerSocket: 9}, 40: {Sockets: 4, CoresPerSocket: 10}, 17: {Sockets: 1, CoresPerSocket: 17}} {
		if got := TopologyOf(cores); got != want {
			t.Errorf("%d cores: %+v, want %+v", cores, got, want)
		}
	}
}

func vmiIn(phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: "vmi1"}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase}}
}

func TestDecidePower(t *testing.T) {
	running, off, failed := vmiIn(kubevirtv1.Running), vmiIn(kubevirtv1.Succeeded), vmiIn(kubevirtv1.Failed)
	deleting := vmiIn(kubevirtv1.Running)
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name string
		in   PowerInputs
		want Power
	}{
		{"AlwaysOn starts a new VM", PowerInputs{Policy: v1alpha2.AlwaysOnPolicy}, PowerStart},
		{"AlwaysOn starts a guest that powered off", PowerInputs{Policy: v1alpha2.AlwaysOnPolicy, VMI: off}, PowerStart},
		{"AlwaysOn starts a failed guest", PowerInputs{Policy: v1alpha2.AlwaysOnPolicy, VMI: failed}, PowerStart},
		{"AlwaysOn leaves a running guest", PowerInputs{Policy: v1alpha2.AlwaysOnPolicy, VMI: running}, PowerNone},
		{"AlwaysOff stops a running guest", PowerInputs{Policy: v1alpha2.AlwaysOffPolicy, VMI: running}, PowerStop},
		{"AlwaysOff never starts", PowerInputs{Policy: v1alpha2.AlwaysOffPolicy, StartPending: true}, PowerNone},
		{"AlwaysOff ignores Automatic restarts", PowerInputs{Policy: v1alpha2.AlwaysOffPolicy, RestartForChanges: true}, PowerNone},
		{"UnlessStoppedManually starts at creation", PowerInputs{Policy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, StartPending: true}, PowerStart},
		{"UnlessStoppedManually stays stopped", PowerInputs{Policy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy}, PowerNone},
		{"UnlessStoppedManually leaves a guest that powered off Stopped", PowerInputs{Policy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, VMI: off}, PowerStop},
		{"UnlessStoppedManually starts a failed guest", PowerInputs{Policy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, VMI: failed}, PowerStart},
		{"default policy is UnlessStoppedManually", PowerInputs{StartPending: true}, PowerStart},
		{"Manual does not start", PowerInputs{Policy: v1alpha2.ManualPolicy}, PowerNone},
		{"Manual leaves a guest that powered off Stopped", PowerInputs{Policy: v1alpha2.ManualPolicy, VMI: off}, PowerStop},
		{"Manual leaves a failed guest Stopped", PowerInputs{Policy: v1alpha2.ManualPolicy, VMI: failed}, PowerStop},
		{"Automatic restart of a running guest", PowerInputs{Policy: v1alpha2.ManualPolicy, VMI: running, RestartForChanges: true}, PowerRestart},
		{"pending requests wait", PowerInputs{Policy: v1alpha2.AlwaysOnPolicy, RequestsPending: true}, PowerNone},
		{"a VMI being deleted waits", PowerInputs{Policy: v1alpha2.AlwaysOffPolicy, VMI: deleting}, PowerNone},
	}
	for _, tc := range cases {
		if got := DecidePower(tc.in); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestStartPending: the first start is owed only to a policy that starts a new VM, and only
// while its stored phase is Pending; Manual and AlwaysOff never owe one.
func TestStartPending(t *testing.T) {
	P, S, St, R := v1alpha2.MachinePending, v1alpha2.MachineStarting, v1alpha2.MachineStopped, v1alpha2.MachineRunning
	cases := []struct {
		policy v1alpha2.RunPolicy
		phase  v1alpha2.MachinePhase
		want   bool
	}{
		{v1alpha2.AlwaysOnPolicy, "", true}, {v1alpha2.AlwaysOnPolicy, P, true}, {v1alpha2.AlwaysOnPolicy, S, false}, {v1alpha2.AlwaysOnPolicy, R, false},
		{v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, P, true}, {v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, St, false},
		{"", P, true}, {"", St, false},
		{v1alpha2.ManualPolicy, "", false}, {v1alpha2.ManualPolicy, P, false}, {v1alpha2.ManualPolicy, St, false},
		{v1alpha2.AlwaysOffPolicy, "", false}, {v1alpha2.AlwaysOffPolicy, P, false},
	}
	for _, tc := range cases {
		vm := &v1alpha2.VirtualMachine{Spec: v1alpha2.VirtualMachineSpec{RunPolicy: tc.policy}, Status: v1alpha2.VirtualMachineStatus{Phase: tc.phase}}
		if got := StartPending(vm); got != tc.want {
			t.Errorf("runPolicy %q, phase %q: StartPending %v, want %v", tc.policy, tc.phase, got, tc.want)
		}
	}
}

func TestStateChangeRequests(t *testing.T) {
	got := StateChangeRequests(PowerRestart, vmiIn(kubevirtv1.Running))
	if len(got) != 2 || got[0].Action != kubevirtv1.StopRequest || *got[0].UID != "vmi1" || got[1].Action != kubevirtv1.StartRequest {
		t.Errorf("restart %+v", got)
	}
	if got := StateChangeRequests(PowerNone, nil); got != nil {
		t.Errorf("none %+v", got)
	}
}

func TestRestartAwaitingChanges(t *testing.T) {
	base := friendlyVM()
	applied, err := MarshalAppliedSpec(&base.Spec)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*v1alpha2.VirtualMachineSpec)
		want []string // operation path current desired
	}{
		{"no change", func(*v1alpha2.VirtualMachineSpec) {}, nil},
		{"live fields apply now", func(s *v1alpha2.VirtualMachineSpec) {
			s.RunPolicy = v1alpha2.AlwaysOffPolicy
			s.Disruptions = &v1alpha2.Disruptions{RestartApprovalMode: v1alpha2.Automatic}
			s.LiveMigrationPolicy = v1alpha2.NeverMigrationPolicy
		}, nil},
		{"cores", func(s *v1alpha2.VirtualMachineSpec) { s.CPU.Cores = 4 }, []string{"replace /cpu/cores 2 4"}},
		{"memory and a node label", func(s *v1alpha2.VirtualMachineSpec) {
			s.Memory.Size = resource.MustParse("2Gi")
			s.NodeSelector["a/b"] = "c"
		}, []string{`replace /memory/size "1Gi" "2Gi"`, `add /nodeSelector/a~1b  "c"`}},
		{"removed tolerations", func(s *v1alpha2.VirtualMachineSpec) { s.Tolerations = nil }, []string{`remove /tolerations [{"key":"vm","operator":"Exists"}] `}},
		{"user data", func(s *v1alpha2.VirtualMachineSpec) {
			s.Provisioning = &v1alpha2.Provisioning{Type: v1alpha2.ProvisioningTypeUserData, UserData: "x"}
		}, []string{`add /provisioning  {"type":"UserData","userData":"sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}`}},
	}
	for _, tc := range cases {
		spec := friendlyVM().Spec
		tc.edit(&spec)
		got, err := RestartAwaitingChanges(applied, &spec)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, c := range got {
			lines = append(lines, c.Operation+" "+c.Path+" "+rawString(c.CurrentValue)+" "+rawString(c.DesiredValue))
		}
		if b, _ := json.Marshal(lines); string(b) != mustJSON(tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, b, mustJSON(tc.want))
		}
	}
	if _, err := RestartAwaitingChanges("{", &base.Spec); err == nil {
		t.Error("a bad annotation accepted")
	}
}

func rawString(r *runtime.RawExtension) string {
	if r == nil {
		return ""
	}
	return string(r.Raw)
}

func mustJSON(v []string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestDevices(t *testing.T) {
	ref := v1alpha2.BlockDeviceSpecRef{Kind: KindVirtualDisk, Name: "d"}
	viRef := v1alpha2.BlockDeviceSpecRef{Kind: KindVirtualImage, Name: "i"}
	cviRef := v1alpha2.BlockDeviceSpecRef{Kind: KindClusterVirtualImage, Name: "c"}
	vd := func(phase v1alpha2.DiskPhase, claim string) *v1alpha2.VirtualDisk {
		return &v1alpha2.VirtualDisk{Status: v1alpha2.VirtualDiskStatus{Phase: phase, Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: claim}}}
	}
	img := func(phase v1alpha2.ImagePhase, cdrom bool) v1alpha2.ImageStatus {
		return v1alpha2.ImageStatus{Phase: phase, CDROM: cdrom}
	}
	vi := func(st v1alpha2.ImageStatus, url, claim string) *v1alpha2.VirtualImage {
		return &v1alpha2.VirtualImage{Status: v1alpha2.VirtualImageStatus{ImageStatus: st, Target: v1alpha2.VirtualImageStatusTarget{RegistryURL: url, PersistentVolumeClaimName: claim}}}
	}
	cvi := &v1alpha2.ClusterVirtualImage{Status: v1alpha2.ClusterVirtualImageStatus{ImageStatus: img(v1alpha2.ImageReady, true), Target: v1alpha2.ClusterVirtualImageStatusTarget{RegistryURL: "dvcr/cvi/x:latest"}}}
	cases := []struct {
		name string
		got  Device
		want Device
	}{
		{"disk not found", DiskDevice(ref, nil), Device{Ref: ref, Reason: "VirtualDisk d not found"}},
		{"disk provisioning", DiskDevice(ref, vd(v1alpha2.DiskProvisioning, "")), Device{Ref: ref, Reason: `VirtualDisk d is not ready (phase "Provisioning")`}},
		{"disk ready", DiskDevice(ref, vd(v1alpha2.DiskReady, "pvc")), Device{Ref: ref, Ready: true, ClaimName: "pvc"}},
		{"disk waiting for its first consumer", DiskDevice(ref, vd(v1alpha2.DiskWaitForFirstConsumer, "pvc")), Device{Ref: ref, Ready: true, ClaimName: "pvc"}},
		{"image in DVCR", VirtualImageDevice(viRef, vi(img(v1alpha2.ImageReady, false), "dvcr/vi/ns/x:latest", "")), Device{Ref: viRef, Ready: true, Image: "dvcr/vi/ns/x:latest", ReadOnly: true}},
		{"image on a claim", VirtualImageDevice(viRef, vi(img(v1alpha2.ImageReady, false), "", "pvc")), Device{Ref: viRef, Ready: true, ClaimName: "pvc", ReadOnly: true}},
		{"image importing", VirtualImageDevice(viRef, vi(img(v1alpha2.ImageProvisioning, false), "", "")), Device{Ref: viRef, ReadOnly: true, Reason: `VirtualImage i is not ready (phase "Provisioning")`}},
		{"cluster ISO", ClusterVirtualImageDevice(cviRef, cvi), Device{Ref: cviRef, Ready: true, Image: "dvcr/cvi/x:latest", ReadOnly: true, CDROM: true}},
		{"cluster image not found", ClusterVirtualImageDevice(cviRef, nil), Device{Ref: cviRef, Reason: "ClusterVirtualImage c not found"}},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}

func TestClassChanged(t *testing.T) {
	base := class(v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery})
	base.Status.CPUFeatures.Enabled = []string{"sse4.2"}
	applied, err := MarshalAppliedClass(base)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(c *v1alpha3.VirtualMachineClass)) *v1alpha3.VirtualMachineClass {
		c := base.DeepCopy()
		f(c)
		return c
	}
	for _, tc := range []struct {
		name    string
		applied string
		class   *v1alpha3.VirtualMachineClass
		want    bool
	}{
		{"the same class", applied, base, false},
		{"a guest from before the annotation", "", edit(func(c *v1alpha3.VirtualMachineClass) { c.Spec.CPU.Type = v1alpha2.CPUTypeHost }), false},
		{"no class now", applied, nil, false},
		{"discovered features", applied, edit(func(c *v1alpha3.VirtualMachineClass) { c.Status.CPUFeatures.Enabled = []string{"avx", "sse4.2"} }), true},
		{"node selector", applied, edit(func(c *v1alpha3.VirtualMachineClass) {
			c.Spec.NodeSelector.MatchLabels = map[string]string{"zone": "b"}
		}), true},
		{"tolerations", applied, edit(func(c *v1alpha3.VirtualMachineClass) {
			c.Spec.Tolerations = append(c.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
		}), true},
		{"sizing policies bound only the VM's spec", applied, edit(func(c *v1alpha3.VirtualMachineClass) {
			c.Spec.SizingPolicies = []v1alpha3.SizingPolicy{{DefaultCoreFraction: ptr.To(v1alpha3.CoreFractionValue("50%"))}}
		}), false},
		{"the InUse condition", applied, edit(func(c *v1alpha3.VirtualMachineClass) { c.Status.Conditions = nil }), false},
	} {
		got, err := ClassChanged(tc.applied, tc.class)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := ClassChanged("{", base); err == nil {
		t.Error("a broken annotation accepted")
	}
}
