// Package crds holds the generated kubevirt.io CRDs of the core (kubevirt.io/) and the tests that
// keep them, and their renamed copies in the repository's crds/ directory, fresh and valid.
package crds

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"sigs.k8s.io/yaml"

	"github.com/d8virt/kube-api-rewriter/pkg/crdrename"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kubevirt-core/hack/crdgen/gen"
)

const (
	originalDir = "kubevirt.io"
	renamedDir  = "../../crds/internal.virtualization.deckhouse.io"
	staleHint   = "the checked-in CRDs are stale: run make crds"
)

// generated is computed once: reflection and comment parsing over the whole API take a moment.
func generated(t *testing.T) (orig, renamed map[string][]byte) {
	t.Helper()
	orig, err := gen.Files()
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	rw := rewrite.New(rules.Default())
	renamed = map[string][]byte{}
	for name, data := range orig {
		var out bytes.Buffer
		// One file per call, first=true: byte for byte what `kube-api-rewriter rename-crds FILE`
		// prints, which is how make crds produces the renamed set.
		if _, err := crdrename.Stream(rw, bytes.NewReader(data), &out, true); err != nil {
			t.Fatalf("rename %s: %v", name, err)
		}
		renamed[name] = out.Bytes()
	}
	return orig, renamed
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	return files
}

// TestUpToDate fails when the checked-in CRDs differ from what the generator and the rewriter's
// CRD tool produce now, e.g. after a bump of kubevirt.io/api or a change of the rename rules.
func TestUpToDate(t *testing.T) {
	orig, renamed := generated(t)
	for _, set := range []struct {
		dir  string
		want map[string][]byte
	}{{originalDir, orig}, {renamedDir, renamed}} {
		got := readDir(t, set.dir)
		for _, name := range gen.Names(set.want) {
			have, ok := got[name]
			switch {
			case !ok:
				t.Errorf("%s/%s is missing; %s", set.dir, name, staleHint)
			case !bytes.Equal(have, set.want[name]):
				t.Errorf("%s/%s differs from the generated one (first difference at line %d); %s",
					set.dir, name, firstDiffLine(have, set.want[name]), staleHint)
			}
		}
		for name := range got {
			if _, ok := set.want[name]; !ok {
				t.Errorf("%s/%s is not generated any more; %s", set.dir, name, staleHint)
			}
		}
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestValid runs the apiserver's own CRD validation on both sets, which includes the structural
// schema rules, list-map keys, defaults, CEL rules and the subresource paths; the apiserver would
// reject any CRD that fails here.
func TestValid(t *testing.T) {
	orig, renamed := generated(t)
	for setName, set := range map[string]map[string][]byte{"original": orig, "renamed": renamed} {
		for _, name := range gen.Names(set) {
			t.Run(setName+"/"+name, func(t *testing.T) {
				crd, err := toInternal(set[name])
				if err != nil {
					t.Fatal(err)
				}
				if errs := validation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
					t.Fatalf("invalid CRD: %v", errs.ToAggregate())
				}
				for _, v := range crd.Spec.Versions {
					// The internal form hoists a schema all versions share to spec.validation.
					val := v.Schema
					if val == nil {
						val = crd.Spec.Validation
					}
					if val == nil || val.OpenAPIV3Schema == nil {
						t.Fatalf("version %s has no schema", v.Name)
					}
					s, err := schema.NewStructural(val.OpenAPIV3Schema)
					if err != nil {
						t.Fatalf("version %s: %v", v.Name, err)
					}
					if errs := schema.ValidateStructural(nil, s); len(errs) > 0 {
						t.Fatalf("version %s is not structural: %v", v.Name, errs.ToAggregate())
					}
					if s.XPreserveUnknownFields {
						t.Errorf("version %s preserves unknown fields at the root, so nothing is pruned", v.Name)
					}
				}
			})
		}
	}
}

func toInternal(data []byte) (*apiextensions.CustomResourceDefinition, error) {
	var v1 apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &v1); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	apiextv1.SetObjectDefaults_CustomResourceDefinition(&v1)
	var crd apiextensions.CustomResourceDefinition
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	return &crd, nil
}

// TestExplainable checks that the schemas reach deep into the VM and carry upstream's documented
// specifics, which is what `kubectl explain` shows.
func TestExplainable(t *testing.T) {
	crds, err := gen.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*apiextv1.CustomResourceDefinition{}
	for _, c := range crds {
		byKind[c.Spec.Names.Kind] = c
	}
	root := byKind["VirtualMachine"].Spec.Versions[0].Schema.OpenAPIV3Schema
	at := func(s *apiextv1.JSONSchemaProps, path ...string) *apiextv1.JSONSchemaProps {
		t.Helper()
		for _, p := range path {
			if p == "[]" {
				s = s.Items.Schema
				continue
			}
			next, ok := s.Properties[p]
			if !ok {
				t.Fatalf("no %q under %v", p, path)
			}
			s = &next
		}
		return s
	}
	domain := at(root, "spec", "template", "spec", "domain")
	if domain.Description == "" || at(domain, "devices", "disks", "[]", "name").Type != "string" {
		t.Errorf("domain schema is incomplete: %q", domain.Description)
	}
	if !contains(root.Required, "spec") {
		t.Errorf("VM spec is not required: %v", root.Required)
	}
	meta := at(root, "spec", "template", "metadata")
	if meta.XPreserveUnknownFields == nil || !*meta.XPreserveUnknownFields || !meta.Nullable {
		t.Errorf("template metadata must keep labels: %+v", meta)
	}
	mem := at(domain, "resources", "requests").AdditionalProperties.Schema
	if !mem.XIntOrString || len(mem.AnyOf) != 2 {
		t.Errorf("quantities are not int-or-string: %+v", mem)
	}
	if ts := at(root, "status", "conditions", "[]", "lastTransitionTime"); ts.Format != "date-time" {
		t.Errorf("times are not date-time: %+v", ts)
	}
	if clock := at(domain, "clock"); clock.XPreserveUnknownFields == nil {
		t.Errorf("Clock must preserve unknown fields as upstream marks it")
	}
	if vmi := byKind["VirtualMachineInstance"]; vmi.Spec.Versions[0].Subresources != nil {
		t.Errorf("the VMI must not have a status subresource")
	}
	if sc := byKind["VirtualMachineInstanceReplicaSet"].Spec.Versions[0].Subresources.Scale; sc == nil || *sc.LabelSelectorPath != ".status.labelSelector" {
		t.Errorf("VMIRS scale subresource: %+v", sc)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
