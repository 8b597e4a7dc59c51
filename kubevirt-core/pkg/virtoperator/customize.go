package virtoperator

import (
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// customize applies the KubeVirt's spec.customizeComponents.patches to the objects they name
// (resourceType is the kind, resourceName the name or "*" for all of that kind), in the order
// given, as KubeVirt does. A patch that does not apply is an error naming it, which the
// KubeVirt's status shows: an installation never runs with half its customisation.
func customize(objs []client.Object, patches []kubevirtv1.CustomizeComponentsPatch) ([]client.Object, error) {
	if len(patches) == 0 {
		return objs, nil
	}
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		for j, p := range patches {
			if p.ResourceType != kindOf(o) || (p.ResourceName != "*" && p.ResourceName != o.GetName()) {
				continue
			}
			patched, err := patchObject(o, p)
			if err != nil {
				return nil, fmt.Errorf("spec.customizeComponents.patches[%d] (%s %s, %s): %w", j, p.ResourceType, p.ResourceName, p.Type, err)
			}
			o = patched
		}
		out[i] = o
	}
	return out, nil
}

// patchObject returns a patched copy of o, of o's own Go type.
func patchObject(o client.Object, p kubevirtv1.CustomizeComponentsPatch) (client.Object, error) {
	orig, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var patched []byte
	switch p.Type {
	case kubevirtv1.JSONPatchType:
		ops, err := jsonpatch.DecodePatch([]byte(p.Patch))
		if err != nil {
			return nil, fmt.Errorf("decode JSON patch: %w", err)
		}
		patched, err = ops.Apply(orig)
		if err != nil {
			return nil, err
		}
	case kubevirtv1.MergePatchType:
		patched, err = jsonpatch.MergePatch(orig, []byte(p.Patch))
		if err != nil {
			return nil, err
		}
	case kubevirtv1.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(orig, []byte(p.Patch), o)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("type %q is none of json, merge, strategic", p.Type)
	}
	out := reflect.New(reflect.TypeOf(o).Elem()).Interface().(client.Object)
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, fmt.Errorf("patched object: %w", err)
	}
	return out, nil
}
