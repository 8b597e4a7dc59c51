package module

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/testenv"
)

// checkIPAM checks the chart's IP address management and webhooks: an Auto address gets one of
// local.yaml's virtualMachineCIDRs with its lease, a static one outside them is denied through
// the chart's webhook configuration (its caBundle set by the controller), and the
// VirtualMachineClass CRD converts through the controller's webhook, its stored versions migrated.
func checkIPAM(t *testing.T, st *stack) {
	t.Helper()
	t.Log("virtualization-controller: IP addresses, the address webhook, the class conversion")
	kc := st.s.KubeconfigPath()
	const ns = "module-e2e-ipam"
	st.kubectl(t, kc, "create", "namespace", ns)
	defer st.kubectl(t, kc, "delete", "namespace", ns, "--timeout=60s")
	address := func(name, spec string) string {
		return "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachineIPAddress\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n" + spec
	}
	if out, err := testenv.KubectlInput(t, kc, address("auto", "  type: Auto\n"), "create", "-f", "-"); err != nil {
		t.Fatalf("create an Auto address: %v\n%s", err, out)
	}
	st.kubectl(t, kc, "-n", ns, "wait", "vmip/auto", "--for=jsonpath={.status.phase}=Bound", "--timeout=60s")
	got := st.kubectl(t, kc, "-n", ns, "get", "vmip/auto", "-o", "jsonpath={.status.address}")
	addr, err := netip.ParseAddr(got)
	if err != nil || !netip.MustParsePrefix("10.213.0.224/27").Contains(addr) {
		t.Fatalf("address %q is not in the test's virtualMachineCIDRs (moduleValues)", got)
	}
	lease := "ip-" + strings.ReplaceAll(got, ".", "-")
	st.kubectl(t, kc, "wait", "vmipl/"+lease, "--for=jsonpath={.status.phase}=Bound", "--timeout=30s")

	// The controller sets the caBundle once it runs: until then the apiserver cannot call it.
	want := `spec.staticIP: Invalid value: "10.99.0.7": The requested address 10.99.0.7 is out of the valid range`
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := testenv.KubectlInput(t, kc, address("outside", "  type: Static\n  staticIP: 10.99.0.7\n"), "create", "-f", "-")
		if err != nil && strings.Contains(out, want) {
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("a static address outside the range: %v\n%s\nwant %q", err, out, want)
		}
		time.Sleep(time.Second)
	}

	crd := "crd/virtualmachineclasses.virtualization.deckhouse.io"
	st.kubectl(t, kc, "wait", crd, "--for=jsonpath={.spec.conversion.strategy}=Webhook", "--timeout=60s")
	deadline = time.Now().Add(60 * time.Second)
	for {
		got := st.kubectl(t, kc, "get", crd, "-o", "jsonpath={.status.storedVersions}")
		if got == `["v1alpha3"]` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("storedVersions %s, want only v1alpha3 after the migration", got)
		}
		time.Sleep(time.Second)
	}
	class := "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachineClass\nmetadata:\n  name: module-e2e-conversion\nspec:\n  cpu: {type: Host}\n  sizingPolicies:\n  - cores: {min: 1, max: 4}\n    coreFractions: [5, 50]\n    defaultCoreFraction: 50\n"
	if out, err := testenv.KubectlInput(t, kc, class, "create", "-f", "-"); err != nil {
		t.Fatalf("create a v1alpha2 class: %v\n%s", err, out)
	}
	defer st.kubectl(t, kc, "delete", "virtualmachineclasses.v1alpha3.virtualization.deckhouse.io", "module-e2e-conversion", "--ignore-not-found")
	if got := st.kubectl(t, kc, "get", "virtualmachineclasses.v1alpha3.virtualization.deckhouse.io", "module-e2e-conversion", "-o", "jsonpath={.spec.sizingPolicies[0].coreFractions}"); got != `["5%","50%"]` {
		t.Errorf("v1alpha3 core fractions %s", got)
	}
	if got := st.kubectl(t, kc, "get", "virtualmachineclasses.v1alpha2.virtualization.deckhouse.io", "module-e2e-conversion", "-o", "jsonpath={.spec.sizingPolicies[0].coreFractions}"); got != `[5,50]` {
		t.Errorf("v1alpha2 core fractions %s", got)
	}
}
