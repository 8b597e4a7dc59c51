package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// VirtualMachine is the kind of the group's only resource, virtualmachines: it exists so that
// discovery and RBAC can name its subresources (virtualmachines/console, ...). It is never
// stored; the objects are the friendly virtualization.deckhouse.io VirtualMachines.
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (in *VirtualMachine) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &VirtualMachine{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// VirtualMachineSession answers a session probe: a GET of console or vnc without an upgrade
// says who holds the VM's session, if anyone.
type VirtualMachineSession struct {
	metav1.TypeMeta `json:",inline"`
	// Held says whether a session is open.
	Held bool `json:"held"`
	// Holder is the user who opened it.
	Holder string `json:"holder,omitempty"`
	// Client is the holder's User-Agent, as it introduced itself.
	Client string `json:"client,omitempty"`
	// StartTime is when the session opened.
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (in *VirtualMachineSession) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := *in
	if in.StartTime != nil {
		t := in.StartTime.DeepCopy()
		out.StartTime = t
	}
	return &out
}
