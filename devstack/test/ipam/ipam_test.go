package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

func TestHundredAddressesAtOnce(t *testing.T) {
	env := testenv.Get(t)
	setupCRDs(t, env)
	c := newClient(t, env)
	cleanupLeases(t, c)
	startController(t, env)
	ns := env.Namespace(t)
	ctx := testenv.Context(t)

	const n = 100
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- c.Create(ctx, &v1alpha2.VirtualMachineIPAddress{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ip-%03d", i)},
				Spec:       v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressTypeAuto},
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rng := testRange(t)
	var list v1alpha2.VirtualMachineIPAddressList
	poll(t, 2*time.Minute, "every address bound", func() (bool, string) {
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		bound := 0
		for _, v := range list.Items {
			if v.Status.Phase == v1alpha2.VirtualMachineIPAddressPhaseBound {
				bound++
			}
		}
		return bound == n, fmt.Sprintf("%d of %d bound", bound, len(list.Items))
	})
	t.Logf("%d addresses bound %s after they were created", n, time.Since(start).Round(time.Millisecond))
	seen := map[string]string{}
	for _, v := range list.Items {
		addr, err := rng.Check(v.Status.Address)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if other, dup := seen[v.Status.Address]; dup {
			t.Fatalf("%s and %s both got %s", v.Name, other, v.Status.Address)
		}
		seen[v.Status.Address] = v.Name
		lease := &v1alpha2.VirtualMachineIPAddressLease{}
		if err := c.Get(ctx, types.NamespacedName{Name: ipam.LeaseName(addr)}, lease); err != nil {
			t.Fatalf("lease of %s: %v", v.Name, err)
		}
		ref := lease.Spec.VirtualMachineIPAddressRef
		if ref == nil || ref.Namespace != ns || ref.Name != v.Name {
			t.Fatalf("lease %s names %+v, want %s/%s", lease.Name, ref, ns, v.Name)
		}
	}
	// No lease of the range is left over from a lost race.
	var leases v1alpha2.VirtualMachineIPAddressLeaseList
	poll(t, 30*time.Second, "one lease per address", func() (bool, string) {
		if err := c.List(ctx, &leases); err != nil {
			return false, err.Error()
		}
		held := 0
		for _, l := range leases.Items {
			if a, err := ipam.ParseLeaseName(l.Name); err == nil && rng.Contains(a) {
				held++
			}
		}
		return held == n, fmt.Sprintf("%d leases in %s", held, testCIDR)
	})
}

func TestAddressSurvivesRestartAndIsReleased(t *testing.T) {
	env := testenv.Get(t)
	setupCRDs(t, env)
	c := newClient(t, env)
	cleanupLeases(t, c)
	ctrl := startController(t, env)
	ns := env.Namespace(t)
	ctx := testenv.Context(t)

	vm := &v1alpha2.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm1"},
		Spec: v1alpha2.VirtualMachineSpec{
			CPU:             v1alpha2.CPUSpec{Cores: 1},
			BlockDeviceRefs: []v1alpha2.BlockDeviceSpecRef{{Kind: v1alpha2.VirtualDiskKind, Name: "disk"}},
		},
	}
	vm.Spec.Memory.Size = mustQuantity("256Mi")
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "vm1"}
	vmip := &v1alpha2.VirtualMachineIPAddress{}
	poll(t, time.Minute, "the machine's address attached", func() (bool, string) {
		if err := c.Get(ctx, key, vmip); err != nil {
			return false, err.Error()
		}
		return vmip.Status.Phase == v1alpha2.VirtualMachineIPAddressPhaseAttached && vmip.Status.VirtualMachineName == "vm1", fmt.Sprintf("%+v", vmip.Status)
	})
	addr := vmip.Status.Address

	// A new controller (a restart) keeps the address.
	ctrl.stop()
	startController(t, env)
	time.Sleep(2 * time.Second) // a few reconciles
	if err := c.Get(ctx, key, vmip); err != nil || vmip.Status.Address != addr {
		t.Fatalf("after a restart: %v, %+v; want %s", err, vmip.Status, addr)
	}

	// The machine goes, the garbage collector takes its address, the lease is released and
	// (retention 0) deleted.
	if err := c.Delete(ctx, vm, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	leaseKey := types.NamespacedName{Name: ipam.LeaseName(mustAddr(t, addr))}
	poll(t, time.Minute, "the lease deleted", func() (bool, string) {
		err := c.Get(ctx, leaseKey, &v1alpha2.VirtualMachineIPAddressLease{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprintf("%v", err)
	})
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestStaticAddressOutsideTheRangeIsDenied(t *testing.T) {
	env := testenv.Get(t)
	setupCRDs(t, env)
	c := newClient(t, env)
	cleanupLeases(t, c)
	ctrl := startController(t, env)
	ns := env.Namespace(t)
	registerValidation(t, env, ctrl, ns)

	manifest := func(name, ip string) string {
		return fmt.Sprintf("apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachineIPAddress\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  type: Static\n  staticIP: %s\n", name, ns, ip)
	}
	out, err := testenv.KubectlInput(t, env.Kubeconfig, manifest("outside", "10.99.0.7"), "create", "-f", "-")
	want := `spec.staticIP: Invalid value: "10.99.0.7": The requested address 10.99.0.7 is out of the valid range`
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("kubectl create of an address outside the range: %v\n%s\nwant %q", err, out, want)
	}
	if out, err := testenv.KubectlInput(t, env.Kubeconfig, manifest("inside", "10.251.0.77"), "create", "-f", "-"); err != nil {
		t.Fatalf("an address inside the range: %v\n%s", err, out)
	}
	key := types.NamespacedName{Namespace: ns, Name: "inside"}
	poll(t, time.Minute, "the static address bound", func() (bool, string) {
		v := &v1alpha2.VirtualMachineIPAddress{}
		if err := c.Get(context.Background(), key, v); err != nil {
			return false, err.Error()
		}
		return v.Status.Phase == v1alpha2.VirtualMachineIPAddressPhaseBound && v.Status.Address == "10.251.0.77", fmt.Sprintf("%+v", v.Status)
	})
	out, err = testenv.KubectlInput(t, env.Kubeconfig, manifest("again", "10.251.0.77"), "create", "-f", "-")
	want = `spec.staticIP: Invalid value: "10.251.0.77": the VirtualMachineIPAddress cannot be created: the specified IP address 10.251.0.77 has already been allocated and has not been released`
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("a second address with the same static IP: %v\n%s\nwant %q", err, out, want)
	}
}

func TestMachineDenials(t *testing.T) {
	env := testenv.Get(t)
	setupCRDs(t, env)
	c := newClient(t, env)
	cleanupLeases(t, c)
	ctrl := startController(t, env)
	ns := env.Namespace(t)
	registerValidation(t, env, ctrl, ns)
	ctx := testenv.Context(t)

	if err := c.Create(ctx, &v1alpha2.VirtualDisk{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "disk"},
		Spec:       v1alpha2.VirtualDiskSpec{PersistentVolumeClaim: v1alpha2.VirtualDiskPersistentVolumeClaim{Size: ptrQuantity("1Gi")}},
	}); err != nil {
		t.Fatal(err)
	}
	machine := func(name, ipName, disk string) string {
		m := fmt.Sprintf("apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachine\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  cpu: {cores: 1}\n  memory: {size: 256Mi}\n  blockDeviceRefs:\n  - {kind: VirtualDisk, name: %s}\n", name, ns, disk)
		if ipName != "" {
			m += "  virtualMachineIPAddressName: " + ipName + "\n"
		}
		return m
	}
	out, err := testenv.KubectlInput(t, env.Kubeconfig, machine("nodisk", "", "missing"), "create", "-f", "-")
	want := `spec.blockDeviceRefs[0].name: Invalid value: "missing": the VirtualDisk missing does not exist in the namespace ` + ns
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("a machine with a missing disk: %v\n%s\nwant %q", err, out, want)
	}
	if out, err := testenv.KubectlInput(t, env.Kubeconfig, machine("first", "", "disk"), "create", "-f", "-"); err != nil {
		t.Fatalf("a machine with its disk: %v\n%s", err, out)
	}
	poll(t, time.Minute, "the first machine's address attached", func() (bool, string) {
		v := &v1alpha2.VirtualMachineIPAddress{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "first"}, v); err != nil {
			return false, err.Error()
		}
		return v.Status.VirtualMachineName == "first", fmt.Sprintf("%+v", v.Status)
	})
	// A machine too big for its class's sizing policy.
	class := "ipam-sizing-" + dnsSuffix()
	classManifest := "apiVersion: virtualization.deckhouse.io/v1alpha3\nkind: VirtualMachineClass\nmetadata:\n  name: " + class +
		"\nspec:\n  cpu: {type: Host}\n  sizingPolicies:\n  - cores: {min: 1, max: 2}\n"
	if out, err := testenv.KubectlInput(t, env.Kubeconfig, classManifest, "create", "-f", "-"); err != nil {
		t.Fatalf("create a class: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = testenv.KubectlInput(t, env.Kubeconfig, "", "delete", "virtualmachineclasses.v1alpha3.virtualization.deckhouse.io", class, "--ignore-not-found")
	})
	big := strings.Replace(machine("big", "", "disk"), "cpu: {cores: 1}", "cpu: {cores: 4}\n  virtualMachineClassName: "+class, 1)
	out, err = testenv.KubectlInput(t, env.Kubeconfig, big, "create", "-f", "-")
	want = `spec.cpu.cores: Invalid value: 4: virtual machine big has no valid size policy in vm class ` + class
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("a machine breaking its class's sizing policy: %v\n%s\nwant %q", err, out, want)
	}

	out, err = testenv.KubectlInput(t, env.Kubeconfig, machine("second", "first", "disk"), "create", "-f", "-")
	want = `spec.virtualMachineIPAddressName: Invalid value: "first": unable to bind the ip address (first) to the virtual machine (second): the ip address has already been linked to another one`
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("a second machine claiming the address: %v\n%s\nwant %q", err, out, want)
	}
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
