package api

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/d8virt/api/client/clientset/versioned"
	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/devstack/testenv"
)

func machine(ns, name string) *v1alpha2.VirtualMachine {
	return &v1alpha2.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.VirtualMachineSpec{
			CPU:             v1alpha2.CPUSpec{Cores: 2, CoreFraction: "25%"},
			Memory:          v1alpha2.MemorySpec{Size: *qty("1Gi")},
			BlockDeviceRefs: []v1alpha2.BlockDeviceSpecRef{{Kind: v1alpha2.VirtualDiskKind, Name: "root"}},
		},
	}
}

func classV3(name string, cpu v1alpha2.CPU, fractions ...v1alpha3.CoreFractionValue) *v1alpha3.VirtualMachineClass {
	return &v1alpha3.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha3.VirtualMachineClassSpec{
			CPU:            cpu,
			SizingPolicies: []v1alpha3.SizingPolicy{{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}}, CoreFractions: fractions}},
		},
	}
}

// cleanupClass deletes a VirtualMachineClass when the test ends.
func cleanupClass(t *testing.T, client versioned.Interface, name string) {
	t.Cleanup(func() {
		err := client.VirtualizationV1alpha3().VirtualMachineClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete VirtualMachineClass %s: %v", name, err)
		}
	})
}

// leaseName is a random lease name in 10.66.0.0/16, for a shared stack.
func leaseName() string {
	return fmt.Sprintf("ip-10-66-%d-%d", rand.IntN(256), rand.IntN(256))
}

// The machine kinds accept valid objects through the typed clientset, with the defaults of the
// schema, and VirtualMachineClass is served in both versions.
func TestMachineKinds(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2()

	vm := machine(ns, "vm")
	vm.Spec.Provisioning = &v1alpha2.Provisioning{Type: v1alpha2.ProvisioningTypeUserData, UserData: "#cloud-config\n"}
	vm.Spec.Tolerations = nil
	got, err := api.VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create VirtualMachine: %v", err)
	}
	if got.Spec.RunPolicy != v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy || got.Spec.OSType != v1alpha2.GenericOs ||
		got.Spec.Bootloader != v1alpha2.BIOS || !ptr.Deref(got.Spec.EnableParavirtualization, false) ||
		ptr.Deref(got.Spec.TerminationGracePeriodSeconds, 0) != 60 || got.Spec.LiveMigrationPolicy != v1alpha2.PreferSafeMigrationPolicy {
		t.Errorf("defaults: %+v", got.Spec)
	}
	ref := machine(ns, "vm-ref")
	ref.Spec.RunPolicy = v1alpha2.ManualPolicy
	ref.Spec.Provisioning = &v1alpha2.Provisioning{Type: v1alpha2.ProvisioningTypeUserDataRef, UserDataRef: &v1alpha2.UserDataRef{Name: "cloud-init"}}
	ref.Spec.Disruptions = &v1alpha2.Disruptions{RestartApprovalMode: v1alpha2.Automatic}
	if _, err := api.VirtualMachines(ns).Create(ctx, ref, metav1.CreateOptions{}); err != nil {
		t.Errorf("create VirtualMachine with a userDataRef: %v", err)
	}

	vmop := &v1alpha2.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stop"},
		Spec:       v1alpha2.VirtualMachineOperationSpec{Type: v1alpha2.VMOPTypeStop, VirtualMachineName: "vm", Force: ptr.To(true)},
	}
	if _, err := api.VirtualMachineOperations(ns).Create(ctx, vmop, metav1.CreateOptions{}); err != nil {
		t.Errorf("create VirtualMachineOperation: %v", err)
	}
	for _, vmip := range []*v1alpha2.VirtualMachineIPAddress{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto"}, Spec: v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressTypeAuto}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "static"}, Spec: v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressTypeStatic, StaticIP: "10.66.10.1"}},
	} {
		if _, err := api.VirtualMachineIPAddresses(ns).Create(ctx, vmip, metav1.CreateOptions{}); err != nil {
			t.Errorf("create VirtualMachineIPAddress %s: %v", vmip.Name, err)
		}
	}
	lease := &v1alpha2.VirtualMachineIPAddressLease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName()},
		Spec:       v1alpha2.VirtualMachineIPAddressLeaseSpec{VirtualMachineIPAddressRef: &v1alpha2.VirtualMachineIPAddressLeaseIPAddressRef{Name: "static", Namespace: ns}},
	}
	if _, err := api.VirtualMachineIPAddressLeases().Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Errorf("create VirtualMachineIPAddressLease: %v", err)
	} else {
		t.Cleanup(func() {
			if err := api.VirtualMachineIPAddressLeases().Delete(context.Background(), lease.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete lease: %v", err)
			}
		})
	}

	// v1alpha3 is the storage version; v1alpha2 is served too, deprecated, with integer fractions.
	v3 := classV3(uniqueName("vmc-v3"), v1alpha2.CPU{Type: v1alpha2.CPUTypeModel, Model: "Nehalem"}, "5%", "100%")
	cleanupClass(t, client, v3.Name)
	if _, err := client.VirtualizationV1alpha3().VirtualMachineClasses().Create(ctx, v3, metav1.CreateOptions{}); err != nil {
		t.Errorf("create v1alpha3 VirtualMachineClass: %v", err)
	}
	v2 := &v1alpha2.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("vmc-v2"), Annotations: map[string]string{v1alpha2.AnnotationDefaultClass: "true"}},
		Spec: v1alpha2.VirtualMachineClassSpec{
			CPU: v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery, Discovery: &v1alpha2.CPUDiscovery{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}},
			SizingPolicies: []v1alpha2.SizingPolicy{{
				SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}},
				CoreFractions:         []v1alpha2.CoreFractionValue{5, 100},
				DefaultCoreFraction:   ptr.To(v1alpha2.CoreFractionValue(5)),
			}},
		},
	}
	cleanupClass(t, client, v2.Name)
	if _, err := api.VirtualMachineClasses().Create(ctx, v2, metav1.CreateOptions{}); err != nil {
		t.Errorf("create v1alpha2 VirtualMachineClass: %v", err)
	}
	out, err := testenv.KubectlInput(t, env.Kubeconfig, "", "get", "virtualmachineclasses.v1alpha2.virtualization.deckhouse.io", v2.Name)
	if err != nil || !strings.Contains(out, "v1alpha2 VirtualMachineClass is deprecated") {
		t.Errorf("kubectl get of v1alpha2 shows no deprecation warning (%v):\n%s", err, out)
	}
}

// The machine kinds refuse bad objects with a message that names the field.
func TestMachineDenials(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2()

	vmop, err := api.VirtualMachineOperations(ns).Create(ctx, &v1alpha2.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "start"},
		Spec:       v1alpha2.VirtualMachineOperationSpec{Type: v1alpha2.VMOPTypeStart, VirtualMachineName: "vm"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class := classV3(uniqueName("vmc"), v1alpha2.CPU{Type: v1alpha2.CPUTypeHost})
	cleanupClass(t, client, class.Name)
	class, err = client.VirtualizationV1alpha3().VirtualMachineClasses().Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	createVM := func(change func(*v1alpha2.VirtualMachine)) func() error {
		return func() error {
			vm := machine(ns, "bad")
			change(vm)
			_, err := api.VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
			return err
		}
	}
	createVMIP := func(spec v1alpha2.VirtualMachineIPAddressSpec) func() error {
		return func() error {
			_, err := api.VirtualMachineIPAddresses(ns).Create(ctx, &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: spec}, metav1.CreateOptions{})
			return err
		}
	}
	cases := []struct {
		name string
		do   func() error
		want denial
	}{
		{"vm userData and userDataRef", createVM(func(vm *v1alpha2.VirtualMachine) {
			vm.Spec.Provisioning = &v1alpha2.Provisioning{Type: v1alpha2.ProvisioningTypeUserData, UserData: "x", UserDataRef: &v1alpha2.UserDataRef{Name: "s"}}
		}), denial{"spec.provisioning.userDataRef", "spec.provisioning.userDataRef must be set when, and only when, spec.provisioning.type is UserDataRef"}},
		{"vm without block devices", createVM(func(vm *v1alpha2.VirtualMachine) { vm.Spec.BlockDeviceRefs = []v1alpha2.BlockDeviceSpecRef{} }),
			denial{"spec.blockDeviceRefs", "should have at least 1 items"}},
		{"vm 17 block devices", createVM(func(vm *v1alpha2.VirtualMachine) {
			for i := range 16 {
				vm.Spec.BlockDeviceRefs = append(vm.Spec.BlockDeviceRefs, v1alpha2.BlockDeviceSpecRef{Kind: v1alpha2.VirtualDiskKind, Name: fmt.Sprint("d", i)})
			}
		}), denial{"spec.blockDeviceRefs", "must have at most 16 items"}},
		{"vm core fraction", createVM(func(vm *v1alpha2.VirtualMachine) { vm.Spec.CPU.CoreFraction = "150%" }), denial{"spec.cpu.coreFraction", "should match"}},
		{"vm run policy", createVM(func(vm *v1alpha2.VirtualMachine) { vm.Spec.RunPolicy = "Sometimes" }), denial{"spec.runPolicy", "Unsupported value"}},
		{"vmop force for Start", func() error {
			_, err := api.VirtualMachineOperations(ns).Create(ctx, &v1alpha2.VirtualMachineOperation{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "force"},
				Spec:       v1alpha2.VirtualMachineOperationSpec{Type: v1alpha2.VMOPTypeStart, VirtualMachineName: "vm", Force: ptr.To(true)},
			}, metav1.CreateOptions{})
			return err
		}, denial{"spec.force", "spec.force is not allowed for type Start"}},
		{"vmop spec changed", func() error {
			changed := vmop.DeepCopy()
			changed.Spec.Type = v1alpha2.VMOPTypeStop
			_, err := api.VirtualMachineOperations(ns).Update(ctx, changed, metav1.UpdateOptions{})
			return err
		}, denial{"spec", "spec is immutable: a VirtualMachineOperation's spec cannot change after creation"}},
		{"vmip Static without address", createVMIP(v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressTypeStatic}),
			denial{"spec.staticIP", "spec.staticIP must be set when, and only when, spec.type is Static"}},
		{"vmip not an address", createVMIP(v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressTypeStatic, StaticIP: "10.66.1"}),
			denial{"spec.staticIP", "spec.staticIP must be an IPv4 address"}},
		// A rule on the root cannot point at metadata.name (the apiserver accepts no such
		// fieldPath), so the cause has no field and the message names it.
		{"vmipl name", func() error {
			_, err := api.VirtualMachineIPAddressLeases().Create(ctx, &v1alpha2.VirtualMachineIPAddressLease{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-66-300-1"}}, metav1.CreateOptions{})
			return err
		}, denial{"<nil>", "metadata.name must be the leased IPv4 address as ip-A-B-C-D"}},
		{"vmclass model without a name", func() error {
			c := classV3(uniqueName("vmc-model"), v1alpha2.CPU{Type: v1alpha2.CPUTypeModel})
			cleanupClass(t, client, c.Name)
			_, err := client.VirtualizationV1alpha3().VirtualMachineClasses().Create(ctx, c, metav1.CreateOptions{})
			return err
		}, denial{"spec.cpu.model", "spec.cpu.model must be set when, and only when, spec.cpu.type is Model"}},
		{"vmclass fraction without percent", func() error {
			c := classV3(uniqueName("vmc-frac"), v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}, "5")
			cleanupClass(t, client, c.Name)
			_, err := client.VirtualizationV1alpha3().VirtualMachineClasses().Create(ctx, c, metav1.CreateOptions{})
			return err
		}, denial{"spec.sizingPolicies[0].coreFractions[0]", "should match"}},
		{"vmclass cpu changed", func() error {
			changed := class.DeepCopy()
			changed.Spec.CPU = v1alpha2.CPU{Type: v1alpha2.CPUTypeHostPassthrough}
			_, err := client.VirtualizationV1alpha3().VirtualMachineClasses().Update(ctx, changed, metav1.UpdateOptions{})
			return err
		}, denial{"spec.cpu", "spec.cpu is immutable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertDenied(t, tc.do(), tc.want)
		})
	}
}

// kubectl shows the machine's columns and explains its fields.
func TestMachineKubectl(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	vm, err := client.VirtualizationV1alpha2().VirtualMachines(ns).Create(ctx, machine(ns, "demo"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	vm.Status = v1alpha2.VirtualMachineStatus{
		Phase: v1alpha2.MachineRunning, NodeName: "node1", IPAddress: "10.66.10.7",
		Conditions: []metav1.Condition{
			{Type: "AgentReady", Status: metav1.ConditionTrue, Reason: "AgentReady", LastTransitionTime: now},
			{Type: "Migratable", Status: metav1.ConditionFalse, Reason: "VirtualMachineNotMigratable", LastTransitionTime: now},
		},
	}
	if _, err := client.VirtualizationV1alpha2().VirtualMachines(ns).UpdateStatus(ctx, vm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"get", "vm", "-n", ns}, []string{"PHASE", "CORES", "COREFRACTION", "MEMORY", "NEED RESTART", "AGENT", "NODE", "IPADDRESS", "AGE", "Running", "25%", "1Gi", "True", "node1", "10.66.10.7"}},
		{[]string{"get", "vm", "-n", ns, "-o", "wide"}, []string{"MIGRATABLE", "False"}},
		{[]string{"explain", "vm.spec.runPolicy"}, []string{"AlwaysOnUnlessStoppedManually (the default)"}},
		{[]string{"explain", "vmclass.spec.sizingPolicies.coreFractions"}, []string{`as percentages from "1%" to "100%"`}},
		{[]string{"explain", "vmop.spec.force"}, []string{"Force makes Stop and Restart kill the guest"}},
	} {
		out := testenv.Kubectl(t, env.Kubeconfig, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(squash(out), squash(w)) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
}
