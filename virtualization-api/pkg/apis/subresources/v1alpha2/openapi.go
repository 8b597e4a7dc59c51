package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// GetOpenAPIDefinitions are the OpenAPI schemas of the group's kinds (the meta kinds they refer
// to come from elsewhere).
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	const pkg = "github.com/d8virt/virtualization-api/pkg/apis/subresources/v1alpha2."
	objectMeta := metav1.ObjectMeta{}.OpenAPIModelName()
	timeName := metav1.Time{}.OpenAPIModelName()
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: desc}}
	}
	typeMeta := map[string]spec.Schema{
		"apiVersion": str("APIVersion of the object."),
		"kind":       str("Kind of the object."),
	}
	with := func(extra map[string]spec.Schema) map[string]spec.Schema {
		out := map[string]spec.Schema{}
		for k, v := range typeMeta {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	return map[string]common.OpenAPIDefinition{
		pkg + "VirtualMachine": {
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Description: "VirtualMachine names the friendly VirtualMachine whose subresources this group serves; it is never stored.",
				Type:        []string{"object"},
				Properties: with(map[string]spec.Schema{
					"metadata": {SchemaProps: spec.SchemaProps{Ref: ref(objectMeta)}},
				}),
			}},
			Dependencies: []string{objectMeta},
		},
		pkg + "VirtualMachineSession": {
			Schema: spec.Schema{SchemaProps: spec.SchemaProps{
				Description: "VirtualMachineSession says who holds a VirtualMachine's console or VNC session.",
				Type:        []string{"object"},
				Required:    []string{"held"},
				Properties: with(map[string]spec.Schema{
					"held":      {SchemaProps: spec.SchemaProps{Type: []string{"boolean"}, Description: "Whether a session is open."}},
					"holder":    str("The user who opened it."),
					"client":    str("The holder's User-Agent."),
					"startTime": {SchemaProps: spec.SchemaProps{Ref: ref(timeName), Description: "When the session opened."}},
				}),
			}},
			Dependencies: []string{timeName},
		},
	}
}
