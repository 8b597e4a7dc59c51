// Package subresource is the catalogue of the friendly VirtualMachine's subresources that
// virtualization-api serves, and the pure decision whether a VM in its current state allows one.
package subresource

import (
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	virtv1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// Subresource is one subresource of virtualmachines.
type Subresource struct {
	// Name is the path element below the VM (virtualmachines/NAME/console), the RBAC
	// subresource and the core's subresource of the VMI of the same name.
	Name string
	// Method is the HTTP method: GET for the streams (RBAC verb get), PUT for the calls
	// (update), as KubeVirt's.
	Method string
	// Stream says it is a WebSocket (plain.kubevirt.io) relayed to the core; otherwise one
	// request whose body is passed on and whose answer comes back.
	Stream bool
	// Exclusive streams allow one session per VM at a time (console, vnc).
	Exclusive bool
	// Subpath says the path goes on below the subresource: portforward/PORT[/PROTOCOL].
	Subpath bool
	// Phases are the VM phases that allow the call.
	Phases []virtv1alpha2.MachinePhase
}

// The phases in which the guest runs (its console, VNC and ports are there).
var guestRuns = []virtv1alpha2.MachinePhase{virtv1alpha2.MachineRunning, virtv1alpha2.MachineMigrating, virtv1alpha2.MachinePause}

// The phases in which a running VMI can take a command.
var running = []virtv1alpha2.MachinePhase{virtv1alpha2.MachineRunning}

// All are the subresources virtualization-api serves. KubeVirt's evacuatecancel is not among
// them: the core does not serve it (a 501 there).
var All = []Subresource{
	{Name: "console", Method: http.MethodGet, Stream: true, Exclusive: true, Phases: guestRuns},
	{Name: "vnc", Method: http.MethodGet, Stream: true, Exclusive: true, Phases: guestRuns},
	{Name: "portforward", Method: http.MethodGet, Stream: true, Subpath: true, Phases: guestRuns},
	{Name: "addvolume", Method: http.MethodPut, Phases: running},
	{Name: "removevolume", Method: http.MethodPut, Phases: running},
	{Name: "freeze", Method: http.MethodPut, Phases: running},
	{Name: "unfreeze", Method: http.MethodPut, Phases: running},
}

// Allow says whether vm, as it is now, allows the call: nil, or a 409 Conflict Status that names
// the VM, the phases that would and the phase it is in.
func Allow(s Subresource, vm *virtv1alpha2.VirtualMachine) error {
	phase := vm.Status.Phase
	if vm.DeletionTimestamp == nil && slices.Contains(s.Phases, phase) {
		return nil
	}
	now := string(phase)
	switch {
	case vm.DeletionTimestamp != nil:
		now = string(virtv1alpha2.MachineTerminating)
	case now == "":
		now = "none yet"
	}
	want := "Running"
	if len(s.Phases) > 1 {
		want = fmt.Sprint(s.Phases)
	}
	return apierrors.NewConflict(virtv1alpha2.Resource("virtualmachines"), vm.Name,
		fmt.Errorf("VirtualMachine is not Running: %s needs the phase %s, the phase is %s", s.Name, want, now))
}
