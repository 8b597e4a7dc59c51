package friendlyvm

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestManifests: every document the builder makes is YAML with the fields it was given, and the
// user data survives as the VM's provisioning.userData.
func TestManifests(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want map[string]string // document kind -> a line it must hold
	}{
		{name: "default class", spec: Spec{Name: "vm", Namespace: "ns", Class: "c", DefaultClass: true, Disk: "d", DiskSize: "64Mi", Image: "img",
			RunPolicy: "AlwaysOff", Cores: 1, CoreFraction: "50%", Memory: "128Mi", UserData: "#cloud-config\nruncmd:\n- echo hi\n"},
			want: map[string]string{"VirtualMachineClass": "is-default-class", "VirtualDisk": "objectRef: {kind: ClusterVirtualImage, name: img}", "VirtualMachine": "runPolicy: AlwaysOff"}},
		{name: "named class, RWX class, migration policy", spec: Spec{Name: "vm", Namespace: "ns", Class: "c", Disk: "d", DiskSize: "64Mi", StorageClass: "rwx", Image: "img",
			RunPolicy: "Manual", Cores: 1, CoreFraction: "100%", Memory: "128Mi", LiveMigrationPolicy: "PreferSafe", TerminationGracePeriodSeconds: 30},
			want: map[string]string{"VirtualDisk": "storageClassName: rwx", "VirtualMachine": "virtualMachineClassName: c"}},
		{name: "booting from the image", spec: Spec{Name: "vm", Namespace: "ns", Class: "c", Image: "img", RunPolicy: "AlwaysOn", Cores: 1, CoreFraction: "100%", Memory: "128Mi"},
			want: map[string]string{"VirtualMachine": "- kind: ClusterVirtualImage\n      name: img"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := strings.Split(tc.spec.Manifest(), "---\n")
			if want := 2 + min(len(tc.spec.Disk), 1); len(docs) != want {
				t.Fatalf("%d documents, want %d", len(docs), want)
			}
			for _, doc := range docs {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					t.Fatalf("%v\n%s", err, doc)
				}
				kind, _ := obj["kind"].(string)
				if line, ok := tc.want[kind]; ok && !strings.Contains(doc, line) {
					t.Errorf("%s has no %q:\n%s", kind, line, doc)
				}
				if kind != "VirtualMachine" {
					continue
				}
				spec := obj["spec"].(map[string]any)
				if tc.spec.UserData != "" {
					if got := spec["provisioning"].(map[string]any)["userData"]; got != tc.spec.UserData {
						t.Errorf("userData %q, want %q", got, tc.spec.UserData)
					}
				}
				if _, named := spec["virtualMachineClassName"]; named == tc.spec.DefaultClass {
					t.Errorf("virtualMachineClassName present %v with DefaultClass %v", named, tc.spec.DefaultClass)
				}
			}
		})
	}
}
