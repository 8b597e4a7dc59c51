package crdrename

import (
	"bytes"
	"strings"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

const vmCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: virtualmachines.kubevirt.io}
spec:
  group: kubevirt.io
  scope: Namespaced
  names: {kind: VirtualMachine, listKind: VirtualMachineList, plural: virtualmachines, singular: virtualmachine, shortNames: [vm, vms], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Status, type: string, jsonPath: .status.printableStatus}
    schema:
      openAPIV3Schema:
        type: object
        description: VirtualMachine handles the VirtualMachines that are not running or are in a stopped state
        properties:
          kind: {type: string, description: "kubevirt.io kinds stay as they are in schemas"}
`

func TestStream(t *testing.T) {
	rw := rewrite.New(rules.Default())
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{
			name: "renames names and keeps schema and columns",
			in:   vmCRD,
			want: []string{
				"name: internalvirtualizationvirtualmachines.internal.virtualization.deckhouse.io",
				"group: internal.virtualization.deckhouse.io",
				"kind: InternalVirtualizationVirtualMachine",
				"listKind: InternalVirtualizationVirtualMachineList",
				"- intvirtvm", "- intvirt",
				"jsonPath: .status.printableStatus",
				"description: kubevirt.io kinds stay as they are in schemas",
			},
		},
		{name: "two documents get one separator", in: vmCRD + "---\n" + vmCRD, want: []string{"\n---\n"}},
		{name: "not a CRD", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", wantErr: "not a CustomResourceDefinition"},
		{name: "group without rules", in: strings.ReplaceAll(vmCRD, "group: kubevirt.io", "group: example.com"), wantErr: "no rename rule"},
		{name: "broken YAML", in: "kind: [", wantErr: "yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Stream(rw, strings.NewReader(tc.in), &out, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "- all") || strings.HasPrefix(out.String(), "---") {
				t.Errorf("output:\n%s", out.String())
			}
		})
	}
}
