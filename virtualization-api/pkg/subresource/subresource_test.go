package subresource

import (
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

func byName(t *testing.T, name string) Subresource {
	t.Helper()
	for _, s := range All {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no subresource %q", name)
	return Subresource{}
}

func TestAllow(t *testing.T) {
	deleted := metav1.Now()
	for _, tc := range []struct {
		sub      string
		phase    virtv1alpha2.MachinePhase
		deleting bool
		msg      string // empty: allowed
	}{
		{"console", virtv1alpha2.MachineRunning, false, ""},
		{"console", virtv1alpha2.MachineMigrating, false, ""},
		{"vnc", virtv1alpha2.MachinePause, false, ""},
		{"portforward", virtv1alpha2.MachineRunning, false, ""},
		{"console", virtv1alpha2.MachineStopped, false, `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": VirtualMachine is not Running: console needs the phase [Running Migrating Pause], the phase is Stopped`},
		{"console", "", false, `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": VirtualMachine is not Running: console needs the phase [Running Migrating Pause], the phase is none yet`},
		{"console", virtv1alpha2.MachineRunning, true, `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": VirtualMachine is not Running: console needs the phase [Running Migrating Pause], the phase is Terminating`},
		{"freeze", virtv1alpha2.MachineRunning, false, ""},
		{"freeze", virtv1alpha2.MachinePause, false, `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": VirtualMachine is not Running: freeze needs the phase Running, the phase is Pause`},
		{"addvolume", virtv1alpha2.MachineStarting, false, `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": VirtualMachine is not Running: addvolume needs the phase Running, the phase is Starting`},
		{"removevolume", virtv1alpha2.MachineRunning, false, ""},
		{"unfreeze", virtv1alpha2.MachineStopping, false, `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": VirtualMachine is not Running: unfreeze needs the phase Running, the phase is Stopping`},
	} {
		vm := &virtv1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}}
		vm.Status.Phase = tc.phase
		if tc.deleting {
			vm.DeletionTimestamp = &deleted
		}
		err := Allow(byName(t, tc.sub), vm)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s in %q: %v", tc.sub, tc.phase, err)
			}
			continue
		}
		if !apierrors.IsConflict(err) || err.Error() != tc.msg {
			t.Errorf("%s in %q: got %v\nwant 409 %s", tc.sub, tc.phase, err, tc.msg)
		}
	}
}

func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All {
		if seen[s.Name] {
			t.Errorf("%s twice", s.Name)
		}
		seen[s.Name] = true
		if s.Stream != (s.Method == http.MethodGet) {
			t.Errorf("%s: streams are GET (RBAC get), calls PUT (update)", s.Name)
		}
		if s.Exclusive && !s.Stream {
			t.Errorf("%s: only streams hold sessions", s.Name)
		}
		if len(s.Phases) == 0 {
			t.Errorf("%s allows no phase", s.Name)
		}
	}
}
