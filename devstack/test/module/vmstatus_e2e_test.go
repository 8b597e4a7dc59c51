package module

import (
	"strings"
	"testing"
)

// checkVMStatus checks, on the running VM module-e2e, what the chart's virtualization-controller
// adds to the VM API: the defaulting webhook is wired (its caBundle set by the controller, the
// VM's cleanup finalizer put on at creation), the class generic is installed (not the default
// with the local values), the launch durations of the start are in status.stats, the class
// without sizing policies leaves no SizingPolicyMatched condition, `kubectl get vm -o wide`
// has the Migratable column, and Migratable is False for the disk on a ReadWriteOnce claim.
func checkVMStatus(t *testing.T, st *stack, kc string) {
	t.Helper()
	t.Log("the VM API: defaulting webhook, class generic, launch durations, Migratable column")
	get := func(args ...string) string {
		return st.kubectl(t, kc, append([]string{"get"}, args...)...)
	}
	hooks := get("mutatingwebhookconfigurations", "-o", `jsonpath={range .items[*]}{.webhooks[0].name} {.webhooks[0].clientConfig.caBundle}{"\n"}{end}`)
	wired := false
	for _, line := range strings.Split(hooks, "\n") {
		if name, ca, _ := strings.Cut(line, " "); name == "vm-defaults.virtualization.deckhouse.io" && ca != "" {
			wired = true
		}
	}
	if !wired {
		t.Errorf("no MutatingWebhookConfiguration with vm-defaults and a caBundle:\n%s", hooks)
	}
	if got := get("-n", "default", "vm/module-e2e", "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, "virtualization.deckhouse.io/vm-cleanup") {
		t.Errorf("finalizers %s", got)
	}
	if got := get("vmclass/generic", "-o", `jsonpath={.spec.cpu.model} {.metadata.annotations.virtualmachineclass\.virtualization\.deckhouse\.io/is-default-class}`); strings.TrimSpace(got) != "Nehalem" {
		t.Errorf("class generic: %q, want model Nehalem and not the default", got)
	}
	d := get("-n", "default", "vm/module-e2e", "-o", "jsonpath={.status.stats.launchTimeDuration.virtualMachineStarting}")
	if d == "" {
		t.Errorf("no status.stats.launchTimeDuration.virtualMachineStarting")
	}
	t.Logf("launch durations: %s", get("-n", "default", "vm/module-e2e", "-o", "jsonpath={.status.stats.launchTimeDuration}"))
	if got := get("-n", "default", "vm/module-e2e", "-o", "jsonpath={.status.conditions[?(@.type=='SizingPolicyMatched')].status}"); got != "" {
		t.Errorf("SizingPolicyMatched %q for a class without sizing policies", got)
	}
	if out := get("-n", "default", "vm", "module-e2e", "-o", "wide"); !strings.Contains(out, "MIGRATABLE") {
		t.Errorf("kubectl get vm -o wide has no MIGRATABLE:\n%s", out)
	}
	// Its disk's claim is ReadWriteOnce (the default StorageClass): the core's LiveMigratable
	// says so, and the VM passes it on.
	st.kubectl(t, kc, "-n", "default", "wait", "vm/module-e2e", "--for=jsonpath={.status.conditions[?(@.type=='Migratable')].status}=False", "--timeout=1m")
	if got := get("-n", "default", "vm/module-e2e", "-o", "jsonpath={.status.conditions[?(@.type=='Migratable')].message}"); !strings.Contains(got, "is not shared, live migration requires that all PVCs must be shared") {
		t.Errorf("Migratable message %q", got)
	}
}
