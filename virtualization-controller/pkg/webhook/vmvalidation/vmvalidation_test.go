package vmvalidation

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

func TestHandle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ip := func(name, user string, owner string) client.Object {
		v := &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		v.Status.VirtualMachineName, v.Status.Address = user, "10.66.10.5"
		if owner != "" {
			v.OwnerReferences = []metav1.OwnerReference{{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachine", Name: owner, UID: "uid-" + "vm"}}
		}
		return v
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk"}},
		&v1alpha2.ClusterVirtualImage{ObjectMeta: metav1.ObjectMeta{Name: "cvi"}},
		ip("taken", "other", ""), ip("free", "", ""), ip("mine", "vm", ""), ip("stray", "", ""), ip("vm-own", "", "vm-own"),
	).WithStatusSubresource(&v1alpha2.VirtualMachineIPAddress{}).Build()
	v := NewValidator(c, admission.NewDecoder(scheme))
	dev := func(kind, name string) v1alpha2.BlockDeviceSpecRef {
		return v1alpha2.BlockDeviceSpecRef{Kind: v1alpha2.BlockDeviceKind(kind), Name: name}
	}
	for _, tc := range []struct {
		name    string
		vmName  string
		ipName  string
		devs    []v1alpha2.BlockDeviceSpecRef
		old     *v1alpha2.VirtualMachine
		message string
	}{
		{name: "all there", vmName: "vm", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk"), dev("ClusterVirtualImage", "cvi")}},
		{name: "a missing disk", vmName: "vm", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk"), dev("VirtualDisk", "nope")},
			message: `VirtualMachine.virtualization.deckhouse.io "vm" is invalid: spec.blockDeviceRefs[1].name: Invalid value: "nope": the VirtualDisk nope does not exist in the namespace ns`},
		{name: "a missing cluster image", vmName: "vm", devs: []v1alpha2.BlockDeviceSpecRef{dev("ClusterVirtualImage", "gone")},
			message: `VirtualMachine.virtualization.deckhouse.io "vm" is invalid: spec.blockDeviceRefs[0].name: Invalid value: "gone": the ClusterVirtualImage gone does not exist`},
		{name: "a device gone since is kept", vmName: "vm", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "nope")},
			old: &v1alpha2.VirtualMachine{Spec: v1alpha2.VirtualMachineSpec{BlockDeviceRefs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "nope")}}}},
		{name: "another machine's address", vmName: "vm", ipName: "taken", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk")},
			message: `VirtualMachine.virtualization.deckhouse.io "vm" is invalid: spec.virtualMachineIPAddressName: Invalid value: "taken": unable to bind the ip address (taken) to the virtual machine (vm): the ip address has already been linked to another one`},
		{name: "a free address", vmName: "vm", ipName: "free", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk")}},
		{name: "its own address", vmName: "vm", ipName: "mine", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk")}},
		{name: "an address with its name, not its own", vmName: "stray", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk")},
			message: `VirtualMachine.virtualization.deckhouse.io "stray" is invalid: spec.virtualMachineIPAddressName: Invalid value: "": VirtualMachineIPAddress with the name of the virtual machine already exists: set spec.virtualMachineIPAddressName field to stray to use IP 10.66.10.5`},
		{name: "the address created for it", vmName: "vm-own", devs: []v1alpha2.BlockDeviceSpecRef{dev("VirtualDisk", "disk")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := v1alpha2.VirtualMachine{
				TypeMeta:   metav1.TypeMeta{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachine"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tc.vmName, UID: "uid-vm"},
				Spec:       v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: tc.ipName, BlockDeviceRefs: tc.devs},
			}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns", Name: vm.Name}}
			req.Object.Raw, _ = json.Marshal(vm)
			if tc.old != nil {
				old := tc.old.DeepCopy()
				old.TypeMeta, old.ObjectMeta = vm.TypeMeta, vm.ObjectMeta
				old.Spec.VirtualMachineIPAddressName = tc.ipName
				req.Operation = admissionv1.Update
				req.OldObject.Raw, _ = json.Marshal(old)
			}
			resp := v.Handle(context.Background(), req)
			if tc.message == "" {
				if !resp.Allowed {
					t.Fatalf("denied: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result.Message != tc.message || resp.Result.Code != 422 {
				t.Fatalf("result %+v\nwant %q", resp.Result, tc.message)
			}
		})
	}
}
