package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	corev1 "k8s.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// liveFields are the top-level spec fields a running VM takes at once: they change what the
// controller does, not the guest. Every other field changes the guest's configuration, which the
// core applies only when it starts the guest again.
var liveFields = map[string]bool{"runPolicy": true, "disruptions": true, "liveMigrationPolicy": true}

// MarshalAppliedSpec is the value of AnnotationAppliedSpec for spec: the spec as JSON, with inline
// cloud-init user data replaced by its SHA-256 (it can be megabytes; a change still shows).
func MarshalAppliedSpec(spec *v1alpha2.VirtualMachineSpec) (string, error) {
	s := spec.DeepCopy()
	if p := s.Provisioning; p != nil && p.UserData != "" {
		sum := sha256.Sum256([]byte(p.UserData))
		p.UserData = "sha256:" + hex.EncodeToString(sum[:])
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("marshal the applied spec: %w", err)
	}
	return string(b), nil
}

// appliedClass is what of a class the guest's configuration is built from: its processor (with
// the features a Discovery class found) and placement. Its sizing policies only bound the VM's
// own spec, which the defaulting webhook fills.
type appliedClass struct {
	CPU          v1alpha2.CPU          `json:"cpu"`
	Features     []string              `json:"features,omitempty"`
	NodeSelector v1alpha2.NodeSelector `json:"nodeSelector"`
	Tolerations  []corev1.Toleration   `json:"tolerations,omitempty"`
}

// MarshalAppliedClass is the value of AnnotationAppliedClass for class.
func MarshalAppliedClass(class *v1alpha3.VirtualMachineClass) (string, error) {
	a := appliedClass{CPU: class.Spec.CPU, NodeSelector: class.Spec.NodeSelector, Tolerations: class.Spec.Tolerations}
	if class.Spec.CPU.Type == v1alpha2.CPUTypeDiscovery {
		a.Features = class.Status.CPUFeatures.Enabled
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("marshal the applied class: %w", err)
	}
	return string(b), nil
}

// ClassChanged reports whether the class the running guest was built from (applied,
// AnnotationAppliedClass of its VMI) differs from class now, as the reference module reports a
// changed VirtualMachineClass.spec: only through the AwaitingRestartToApplyConfiguration
// condition, not in restartAwaitingChanges (whose paths are the VM's). A VMI without the
// annotation (built before it existed) is taken as current.
func ClassChanged(applied string, class *v1alpha3.VirtualMachineClass) (bool, error) {
	if applied == "" || class == nil {
		return false, nil
	}
	now, err := MarshalAppliedClass(class)
	if err != nil {
		return false, err
	}
	var from, to any
	if err := json.Unmarshal([]byte(applied), &from); err != nil {
		return false, fmt.Errorf("annotation %s: %w", AnnotationAppliedClass, err)
	}
	if err := json.Unmarshal([]byte(now), &to); err != nil {
		return false, fmt.Errorf("the class now: %w", err)
	}
	return !reflect.DeepEqual(from, to), nil
}

// RestartAwaitingChanges are the differences between the spec the running guest was built from
// (applied, AnnotationAppliedSpec of its VMI) and the desired spec, outside liveFields, as JSON
// patch operations from applied to desired, sorted by path. Objects are compared field by field;
// lists and scalars as a whole.
func RestartAwaitingChanges(applied string, desired *v1alpha2.VirtualMachineSpec) ([]v1alpha2.RestartAwaitingChange, error) {
	want, err := MarshalAppliedSpec(desired)
	if err != nil {
		return nil, err
	}
	var from, to map[string]any
	if err := json.Unmarshal([]byte(applied), &from); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationAppliedSpec, err)
	}
	if err := json.Unmarshal([]byte(want), &to); err != nil {
		return nil, fmt.Errorf("desired spec: %w", err)
	}
	for f := range liveFields {
		delete(from, f)
		delete(to, f)
	}
	var out []v1alpha2.RestartAwaitingChange
	diff("", from, to, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func diff(path string, from, to any, out *[]v1alpha2.RestartAwaitingChange) {
	fm, fok := from.(map[string]any)
	tm, tok := to.(map[string]any)
	if fok && tok {
		for k, fv := range fm {
			p := path + "/" + escapePointer(k)
			if tv, ok := tm[k]; ok {
				diff(p, fv, tv, out)
			} else {
				*out = append(*out, v1alpha2.RestartAwaitingChange{Operation: "remove", Path: p, CurrentValue: raw(fv)})
			}
		}
		for k, tv := range tm {
			if _, ok := fm[k]; !ok {
				*out = append(*out, v1alpha2.RestartAwaitingChange{Operation: "add", Path: path + "/" + escapePointer(k), DesiredValue: raw(tv)})
			}
		}
		return
	}
	if !reflect.DeepEqual(from, to) {
		*out = append(*out, v1alpha2.RestartAwaitingChange{Operation: "replace", Path: path, CurrentValue: raw(from), DesiredValue: raw(to)})
	}
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func raw(v any) *runtime.RawExtension {
	b, _ := json.Marshal(v) // decoded from JSON: always marshals
	return &runtime.RawExtension{Raw: b}
}
