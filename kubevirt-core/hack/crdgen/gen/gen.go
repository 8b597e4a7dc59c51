// Package gen builds the kubevirt.io CRDs of the core from the upstream Go types (kubevirt.io/api),
// with the names, short names, categories, printer columns, versions and subresources KubeVirt
// v1.6 registers. The schemas come from reflection over the types plus their doc comments, so
// `kubectl explain` works as it does on a KubeVirt cluster.
package gen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	group         = "kubevirt.io"
	ageColumnPath = ".metadata.creationTimestamp"
	phasePath     = ".status.phase"
)

// crdDef is what KubeVirt's virt-operator decides per CRD; the schema is added from obj's type.
type crdDef struct {
	kind, plural, singular string
	shortNames             []string
	obj                    any
	labels                 map[string]string
	columns                []apiextv1.CustomResourceColumnDefinition
	subresources           *apiextv1.CustomResourceSubresources
	versions               []apiextv1.CustomResourceDefinitionVersion
}

// supportedVersions is KubeVirt's list for most kinds: v1 is stored, v1alpha3 is still served
// (same schema) with a deprecation warning.
func supportedVersions() []apiextv1.CustomResourceDefinitionVersion {
	return []apiextv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true},
		{
			Name: "v1alpha3", Served: true, Deprecated: true,
			DeprecationWarning: ptr("kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release."),
		},
	}
}

// presetVersions: KubeVirt deprecated presets in both versions and still stores them as v1alpha3.
func presetVersions() []apiextv1.CustomResourceDefinitionVersion {
	return []apiextv1.CustomResourceDefinitionVersion{
		{
			Name: "v1", Served: true, Deprecated: true,
			DeprecationWarning: ptr("kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."),
		},
		{
			Name: "v1alpha3", Served: true, Storage: true, Deprecated: true,
			DeprecationWarning: ptr("kubevirt.io/v1alpha3 VirtualMachineInstancePresets is now deprecated and will be removed in v2."),
		},
	}
}

func column(name, typ, path, desc string, priority int32) apiextv1.CustomResourceColumnDefinition {
	return apiextv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path, Description: desc, Priority: priority}
}

func statusOnly() *apiextv1.CustomResourceSubresources {
	return &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}}
}

// definitions lists the CRDs of the core as KubeVirt v1.6's virt-operator creates them.
func definitions() []crdDef {
	coreLabels := map[string]string{"kubevirt.io": ""}
	return []crdDef{
		{
			kind: "VirtualMachine", plural: "virtualmachines", singular: "virtualmachine",
			shortNames: []string{"vm", "vms"}, obj: &virtv1.VirtualMachine{}, labels: coreLabels,
			columns: []apiextv1.CustomResourceColumnDefinition{
				column("Age", "date", ageColumnPath, "", 0),
				column("Status", "string", ".status.printableStatus", "Human Readable Status", 0),
				column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status", "", 0),
			},
			subresources: statusOnly(),
			versions:     supportedVersions(),
		},
		{
			// No status subresource: virt-handler and virt-controller write the VMI status with
			// ordinary updates, and the VMI webhook guards who may change what.
			kind: "VirtualMachineInstance", plural: "virtualmachineinstances", singular: "virtualmachineinstance",
			shortNames: []string{"vmi", "vmis"}, obj: &virtv1.VirtualMachineInstance{}, labels: coreLabels,
			columns: []apiextv1.CustomResourceColumnDefinition{
				column("Age", "date", ageColumnPath, "", 0),
				column("Phase", "string", phasePath, "", 0),
				column("IP", "string", ".status.interfaces[0].ipAddress", "", 0),
				column("NodeName", "string", ".status.nodeName", "", 0),
				column("Ready", "string", ".status.conditions[?(@.type=='Ready')].status", "", 0),
				column("Live-Migratable", "string", ".status.conditions[?(@.type=='LiveMigratable')].status", "", 1),
				column("Paused", "string", ".status.conditions[?(@.type=='Paused')].status", "", 1),
			},
			versions: supportedVersions(),
		},
		{
			kind: "VirtualMachineInstanceReplicaSet", plural: "virtualmachineinstancereplicasets", singular: "virtualmachineinstancereplicaset",
			shortNames: []string{"vmirs", "vmirss"}, obj: &virtv1.VirtualMachineInstanceReplicaSet{}, labels: coreLabels,
			columns: []apiextv1.CustomResourceColumnDefinition{
				column("Desired", "integer", ".spec.replicas", "Number of desired VirtualMachineInstances", 0),
				column("Current", "integer", ".status.replicas", "Number of managed and not final or deleted VirtualMachineInstances", 0),
				column("Ready", "integer", ".status.readyReplicas", "Number of managed VirtualMachineInstances which are ready to receive traffic", 0),
				column("Age", "date", ageColumnPath, "", 0),
			},
			subresources: &apiextv1.CustomResourceSubresources{
				Status: &apiextv1.CustomResourceSubresourceStatus{},
				Scale: &apiextv1.CustomResourceSubresourceScale{
					SpecReplicasPath:   ".spec.replicas",
					StatusReplicasPath: ".status.replicas",
					LabelSelectorPath:  ptr(".status.labelSelector"),
				},
			},
			versions: supportedVersions(),
		},
		{
			kind: "VirtualMachineInstancePreset", plural: "virtualmachineinstancepresets", singular: "virtualmachineinstancepreset",
			shortNames: []string{"vmipreset", "vmipresets"}, obj: &virtv1.VirtualMachineInstancePreset{}, labels: coreLabels,
			versions: presetVersions(),
		},
		{
			kind: "VirtualMachineInstanceMigration", plural: "virtualmachineinstancemigrations", singular: "virtualmachineinstancemigration",
			shortNames: []string{"vmim", "vmims"}, obj: &virtv1.VirtualMachineInstanceMigration{}, labels: coreLabels,
			columns: []apiextv1.CustomResourceColumnDefinition{
				column("Phase", "string", phasePath, "The current phase of VM instance migration", 0),
				column("VMI", "string", ".spec.vmiName", "The name of the VMI to perform the migration on", 0),
			},
			subresources: statusOnly(),
			versions:     supportedVersions(),
		},
		{
			// virt-operator labels its own CRD differently from the ones it installs.
			kind: "KubeVirt", plural: "kubevirts", singular: "kubevirt",
			shortNames: []string{"kv", "kvs"}, obj: &virtv1.KubeVirt{}, labels: map[string]string{"operator.kubevirt.io": ""},
			columns: []apiextv1.CustomResourceColumnDefinition{
				column("Age", "date", ageColumnPath, "", 0),
				column("Phase", "string", phasePath, "", 0),
			},
			subresources: statusOnly(),
			versions:     supportedVersions(),
		},
	}
}

// CRDs builds every CRD of the core.
func CRDs() ([]*apiextv1.CustomResourceDefinition, error) {
	b := newBuilder()
	var out []*apiextv1.CustomResourceDefinition
	for _, d := range definitions() {
		s, err := b.schema(reflect.TypeOf(d.obj))
		if err != nil {
			return nil, fmt.Errorf("schema of %s: %w", d.kind, err)
		}
		// The apiserver owns metadata; a description there would only repeat ObjectMeta's.
		s.Properties["metadata"] = apiextv1.JSONSchemaProps{Type: "object"}
		crd := &apiextv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: d.plural + "." + group, Labels: d.labels},
			Spec: apiextv1.CustomResourceDefinitionSpec{
				Group: group,
				Scope: apiextv1.NamespaceScoped,
				Names: apiextv1.CustomResourceDefinitionNames{
					Kind: d.kind, ListKind: d.kind + "List", Plural: d.plural, Singular: d.singular,
					ShortNames: d.shortNames, Categories: []string{"all"},
				},
			},
		}
		for _, v := range d.versions {
			schema := s.DeepCopy()
			v.Schema = &apiextv1.CustomResourceValidation{OpenAPIV3Schema: schema}
			v.AdditionalPrinterColumns = d.columns
			v.Subresources = d.subresources
			crd.Spec.Versions = append(crd.Spec.Versions, v)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Files renders every CRD as YAML, keyed by file name (the plural, so names stay stable when the
// renamed copies are made from them).
func Files() (map[string][]byte, error) {
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, crd := range crds {
		data, err := Marshal(crd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Name, err)
		}
		files[crd.Spec.Names.Plural+".yaml"] = data
	}
	return files, nil
}

// Marshal renders a CRD as YAML without the empty status and creationTimestamp a typed
// CustomResourceDefinition always serializes, so the files look like hand-written manifests.
func Marshal(crd *apiextv1.CustomResourceDefinition) ([]byte, error) {
	raw, err := json.Marshal(crd)
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("unmarshal: %w", err)
	}
	delete(doc, "status")
	if md, ok := doc["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("to YAML: %w", err)
	}
	return out, nil
}

// Write writes the CRD files into dir and removes YAML files there that are no longer generated,
// so a dropped kind does not linger in the checked-in set.
func Write(dir string) error {
	files, err := Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return fmt.Errorf("list old files: %w", err)
	}
	for _, p := range old {
		if _, keep := files[filepath.Base(p)]; !keep {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("remove stale CRD: %w", err)
			}
		}
	}
	for _, n := range Names(files) {
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return fmt.Errorf("write CRD: %w", err)
		}
	}
	return nil
}

// Names lists the generated file names, sorted; tests compare directories with it.
func Names(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
