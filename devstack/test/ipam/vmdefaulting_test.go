package ipam

import (
	"context"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/devstack/testenv"
	vmctrl "github.com/d8virt/virtualization-controller/pkg/controller/vm"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmdefaulting"
)

// TestVirtualMachineDefaulting: the apiserver calls the defaulting webhook, and a VirtualMachine
// created without a class and a core fraction reads back with the default class and that
// class's default fraction for its cores; what the user set is kept.
func TestVirtualMachineDefaulting(t *testing.T) {
	env := testenv.Get(t)
	setupCRDs(t, env)
	c := startController(t, env)
	ns := env.Namespace(t)
	ctx := testenv.Context(t)
	registerDefaulting(t, env, c, ns)
	// The webhook puts the VM controller's finalizer on every new VM; no controller runs here to
	// take it off, so the test does (registered after the namespace's cleanup: it runs first).
	t.Cleanup(func() { dropFinalizers(t, env, ns) })
	scheme := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{v1alpha2.AddToScheme, v1alpha3.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	twenty := v1alpha3.CoreFractionValue("20%")
	class := &v1alpha3.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-default", Annotations: map[string]string{v1alpha2.AnnotationDefaultClass: "true"}},
		Spec: v1alpha3.VirtualMachineClassSpec{
			CPU: v1alpha2.CPU{Type: v1alpha2.CPUTypeHost},
			SizingPolicies: []v1alpha3.SizingPolicy{{
				SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}},
				CoreFractions:         []v1alpha3.CoreFractionValue{"20%", "50%", "100%"}, DefaultCoreFraction: &twenty,
			}},
		},
	}
	if err := cl.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Delete(context.Background(), class); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete class: %v", err)
		}
	})
	var classes v1alpha3.VirtualMachineClassList
	if err := cl.List(ctx, &classes); err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, k := range classes.Items {
		if k.Annotations[v1alpha2.AnnotationDefaultClass] == "true" {
			defaults = append(defaults, k.Name)
		}
	}
	if len(defaults) != 1 {
		t.Fatalf("the stack has other default classes than the test's: %v", defaults)
	}

	vm := func(name, className, fraction string) *v1alpha2.VirtualMachine {
		return &v1alpha2.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha2.VirtualMachineSpec{
				VirtualMachineClassName: className,
				CPU:                     v1alpha2.CPUSpec{Cores: 2, CoreFraction: fraction},
				Memory:                  v1alpha2.MemorySpec{Size: resource.MustParse("128Mi")},
				BlockDeviceRefs:         []v1alpha2.BlockDeviceSpecRef{{Kind: v1alpha2.VirtualDiskKind, Name: "root"}},
			},
		}
	}
	// The apiserver picks a new webhook configuration up within a moment: a dry run shows when.
	poll(t, 30*time.Second, "the defaulting webhook called", func() (bool, string) {
		probe := vm("probe", "", "")
		if err := cl.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return probe.Spec.VirtualMachineClassName != "", "not defaulted"
	})
	for _, tc := range []struct {
		vm                  *v1alpha2.VirtualMachine
		wantClass, wantFrac string
	}{
		{vm: vm("bare", "", ""), wantClass: class.Name, wantFrac: "20%"},
		{vm: vm("own-fraction", "", "50%"), wantClass: class.Name, wantFrac: "50%"},
		{vm: vm("other-class", "not-there", ""), wantClass: "not-there", wantFrac: ""},
	} {
		if err := cl.Create(ctx, tc.vm); err != nil {
			t.Fatalf("create %s: %v", tc.vm.Name, err)
		}
		got := &v1alpha2.VirtualMachine{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(tc.vm), got); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got.Finalizers, vmctrl.Finalizer) {
			t.Errorf("%s has no finalizer %s: %v", tc.vm.Name, vmctrl.Finalizer, got.Finalizers)
		}
		if s := got.Spec; s.VirtualMachineClassName != tc.wantClass || s.CPU.CoreFraction != tc.wantFrac || s.RunPolicy != v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy {
			t.Errorf("%s read back with class %q, coreFraction %q, runPolicy %q; want %q, %q, AlwaysOnUnlessStoppedManually",
				tc.vm.Name, s.VirtualMachineClassName, s.CPU.CoreFraction, s.RunPolicy, tc.wantClass, tc.wantFrac)
		}
	}

	// An update that clears the class gets the default again.
	got := &v1alpha2.VirtualMachine{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other-class"}, got); err != nil {
		t.Fatal(err)
	}
	got.Spec.VirtualMachineClassName = ""
	if err := cl.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.VirtualMachineClassName != class.Name || got.Spec.CPU.CoreFraction != "20%" {
		t.Errorf("after an update without a class: class %q coreFraction %q", got.Spec.VirtualMachineClassName, got.Spec.CPU.CoreFraction)
	}
}

// dropFinalizers takes every finalizer off the VirtualMachines of ns.
func dropFinalizers(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	c := newClient(t, env)
	var vms v1alpha2.VirtualMachineList
	if err := c.List(context.Background(), &vms, client.InNamespace(ns)); err != nil {
		t.Errorf("list VMs: %v", err)
		return
	}
	for i := range vms.Items {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := c.Patch(context.Background(), &vms.Items[i], patch); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("drop the finalizers of %s: %v", vms.Items[i].Name, err)
		}
	}
}

// registerDefaulting registers the VirtualMachine defaulting webhook for namespace ns only.
func registerDefaulting(t *testing.T, env *testenv.Env, c *controller, ns string) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	url := c.url + vmdefaulting.Path
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "defaulting-test-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "vm-defaults.virtualization.deckhouse.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: c.ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"virtualization.deckhouse.io"}, APIVersions: []string{"v1alpha2"}, Resources: []string{"virtualmachines"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	api := env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(testenv.Context(t), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete webhook configuration: %v", err)
		}
	})
}
