package subresources

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestVolumeRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		add        bool
		wantCode   int32
		wantMsg    string
	}{
		{"add without name", `{}`, true, http.StatusBadRequest, "AddVolumeOptions requires name to be set"},
		{"add without disk", `{"name":"v"}`, true, http.StatusBadRequest, "AddVolumeOptions requires disk to not be nil"},
		{"add without source", `{"name":"v","disk":{}}`, true, http.StatusBadRequest, "AddVolumeOptions requires VolumeSource to not be nil"},
		{"add garbage", `{"name":`, true, http.StatusBadRequest, "Can not unmarshal Request body to struct"},
		{"add", `{"name":"v","disk":{"disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"c"}}}`, true, 0, ""},
		{"remove without name", ``, false, http.StatusBadRequest, "RemoveVolumeOptions requires name to be set"},
		{"remove", `{"name":"v"}`, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, serr := VolumeRequest(tc.add, strings.NewReader(tc.body))
			if tc.wantCode != 0 {
				if serr == nil || serr.ErrStatus.Code != tc.wantCode || !strings.Contains(serr.ErrStatus.Message, tc.wantMsg) {
					t.Fatalf("VolumeRequest = %v, want %d %q", serr, tc.wantCode, tc.wantMsg)
				}
				return
			}
			if serr != nil {
				t.Fatal(serr)
			}
			if add := req.AddVolumeOptions; add != nil && (add.Disk.Name != "v" || !add.VolumeSource.PersistentVolumeClaim.Hotpluggable) {
				t.Errorf("the add request names its disk %q, hotpluggable %v", add.Disk.Name, add.VolumeSource.PersistentVolumeClaim.Hotpluggable)
			}
		})
	}
}

func hotVM(pending ...kubevirtv1.VirtualMachineVolumeRequest) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	vm.Name = "vm"
	vm.Spec.Template.Spec.Volumes = []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}
	vm.Status.VolumeRequests = pending
	return vm
}

func withStatus(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachine {
	vm.Status.Created = true
	return vm
}

func addOpts(name, claim string) *kubevirtv1.VirtualMachineVolumeRequest {
	return &kubevirtv1.VirtualMachineVolumeRequest{AddVolumeOptions: &kubevirtv1.AddVolumeOptions{Name: name, Disk: &kubevirtv1.Disk{Name: name},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}, Hotpluggable: true}}}}
}

func TestVMVolumePlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vm      *kubevirtv1.VirtualMachine
		req     *kubevirtv1.VirtualMachineVolumeRequest
		wantErr string
		wantOps string
	}{
		{"a VM without status gets one", hotVM(), addOpts("hot", "c"), "", `"op":"add","path":"/status","value":{"volumeRequests"`},
		{"first request adds the list", withStatus(hotVM()), addOpts("hot", "c"), "", `"op":"add","path":"/status/volumeRequests"`},
		{"later ones replace it", withStatus(hotVM(*addOpts("a", "ca"))), addOpts("hot", "c"), "", `"op":"replace","path":"/status/volumeRequests"`},
		{"duplicate name", hotVM(), addOpts("data", "c"), "Unable to add volume [data] because volume with that name already exists", ""},
		{"not hotpluggable", hotVM(), &kubevirtv1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &kubevirtv1.RemoveVolumeOptions{Name: "data"}},
			"Unable to remove volume [data] because it is not hotpluggable", ""},
		{"pending twice", hotVM(*addOpts("hot", "c")), addOpts("hot", "c"), "add volume request for volume [hot] already exists", ""},
		{"dry run", withStatus(hotVM()), func() *kubevirtv1.VirtualMachineVolumeRequest {
			r := addOpts("hot", "c")
			r.AddVolumeOptions.DryRun = []string{metav1.DryRunAll}
			return r
		}(), "", `"op":"add","path":"/status/volumeRequests"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, serr := VMVolumePlan(tc.vm, tc.req)
			if tc.wantErr != "" {
				if serr == nil || serr.ErrStatus.Code != http.StatusConflict || !strings.Contains(serr.ErrStatus.Message, tc.wantErr) {
					t.Fatalf("VMVolumePlan = %v, want 409 %q", serr, tc.wantErr)
				}
				return
			}
			if serr != nil {
				t.Fatal(serr)
			}
			if !strings.Contains(string(p.StatusJSONPatch), tc.wantOps) || (tc.vm.Status.Created && !strings.Contains(string(p.StatusJSONPatch), `"op":"test"`)) {
				t.Errorf("patch %s lacks %s or its test op", p.StatusJSONPatch, tc.wantOps)
			}
			if want := tc.req.AddVolumeOptions != nil && len(tc.req.AddVolumeOptions.DryRun) > 0; p.DryRun != want {
				t.Errorf("dry run %v, want %v", p.DryRun, want)
			}
		})
	}
}

func TestVMIVolumePatch(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Name = "vmi"
	vmi.Spec.Volumes = hotVM().Spec.Template.Spec.Volumes
	vmi.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "data"}}
	if _, serr := VMIVolumePatch(vmi, addOpts("hot", "c")); serr == nil || serr.ErrStatus.Code != http.StatusConflict || serr.ErrStatus.Message != `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "vmi": VMI is not running` {
		t.Fatalf("a VMI that does not run: %v", serr)
	}
	vmi.Status.Phase = kubevirtv1.Running
	p, serr := VMIVolumePatch(vmi, addOpts("hot", "c"))
	if serr != nil {
		t.Fatal(serr)
	}
	var ops []struct {
		Op, Path string
		Value    json.RawMessage
	}
	if err := json.Unmarshal(p, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4 || ops[0].Op != "test" || ops[1].Path != "/spec/volumes" || ops[3].Path != "/spec/domain/devices/disks" ||
		!strings.Contains(string(ops[1].Value), `"hotpluggable":true`) {
		t.Errorf("patch %s", p)
	}
}
