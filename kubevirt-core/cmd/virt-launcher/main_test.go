package main

import "testing"

// TestFlags: the launcher runs only as a Pod's container runs it; it needs the VMI's identity.
// The tests that run the binary (guests, the node labeller mode) are in devstack/test/virt-launcher.
func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"--name", "vm", "--namespace", "ns", "--uid", "u", "--grace-period-seconds", "75"})
	if err != nil || o.name != "vm" || o.namespace != "ns" || o.uid != "u" || o.grace != 75 {
		t.Fatalf("parseFlags = %+v, %v", o, err)
	}
	if res := serve(&options{}, nil); res.ExitCode != 1 {
		t.Errorf("without --name, --namespace and --uid: %+v, want exit 1", res)
	}
}
