package app

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const vmCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: virtualmachines.kubevirt.io
spec:
  group: kubevirt.io
  names:
    kind: VirtualMachine
    listKind: VirtualMachineList
    plural: virtualmachines
    singular: virtualmachine
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`

func TestRenameCRDs(t *testing.T) {
	dir := t.TempDir()
	vm := filepath.Join(dir, "vm.yaml")
	if err := os.WriteFile(vm, []byte(vmCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		stdin   string
		want    []string // in the output, in order
		wantErr string
	}{
		{name: "no file", wantErr: errRenameCRDsUsage.Error()},
		{name: "a file", args: []string{vm}, want: []string{"name: internalvirtualizationvirtualmachines.internal.virtualization.deckhouse.io"}},
		{name: "standard input", args: []string{"-"}, stdin: vmCRD, want: []string{"kind: InternalVirtualizationVirtualMachine\n"}},
		{name: "two files", args: []string{vm, "-"}, stdin: vmCRD, want: []string{"internalvirtualizationvirtualmachines", "\n---\n", "internalvirtualizationvirtualmachines"}},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.yaml")}, wantErr: "open "},
		{name: "bad YAML", args: []string{"-"}, stdin: "{", wantErr: "-: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := RenameCRDs(c.args, strings.NewReader(c.stdin), &out)
			if failed(t, err, c.wantErr) {
				return
			}
			rest := out.String()
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out.String())
				}
				rest = rest[i+len(w):]
			}
		})
	}
	if !errors.Is(RenameCRDs(nil, nil, nil), errRenameCRDsUsage) {
		t.Error("no arguments: not the usage error")
	}
}
