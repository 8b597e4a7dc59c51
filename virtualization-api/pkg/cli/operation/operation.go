// Package operation creates the VirtualMachineOperations of the client's lifecycle commands
// (start, stop, restart, migrate, evict) and follows one until it ends, reporting each change of
// its progress.
package operation

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	client "github.com/d8virt/api/client/clientset/versioned/typed/core/v1alpha2"
	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
)

// New is the operation of type typ on the VirtualMachine vm of namespace; its name is generated
// from the machine's and the type's.
func New(namespace, vm string, typ v1alpha2.VMOPType, force bool) *v1alpha2.VirtualMachineOperation {
	op := &v1alpha2.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: vm + "-" + strings.ToLower(string(typ)) + "-"},
		Spec:       v1alpha2.VirtualMachineOperationSpec{Type: typ, VirtualMachineName: vm},
	}
	if force {
		op.Spec.Force = &force
	}
	return op
}

// Progress is one line of an operation's state: its phase, a migration's progress, the Completed
// condition's reason and message, and the machine's phase.
func Progress(op *v1alpha2.VirtualMachineOperation, vmPhase v1alpha2.MachinePhase) string {
	phase := string(op.Status.Phase)
	if phase == "" {
		phase = "Created"
	}
	var b strings.Builder
	b.WriteString(phase)
	if op.Status.Progress != "" {
		fmt.Fprintf(&b, " %s", op.Status.Progress)
	}
	if c := meta.FindStatusCondition(op.Status.Conditions, string(vmopcondition.TypeCompleted)); c != nil && c.Reason != "" {
		fmt.Fprintf(&b, " (%s", c.Reason)
		if c.Message != "" {
			fmt.Fprintf(&b, ": %s", c.Message)
		}
		b.WriteString(")")
	}
	if vmPhase != "" {
		fmt.Fprintf(&b, ", VirtualMachine %s", vmPhase)
	}
	return b.String()
}

// Ended says whether the operation has ended; a Failed or Superseded one ends with an error
// that says why and what to look at.
func Ended(op *v1alpha2.VirtualMachineOperation) (bool, error) {
	why := ""
	if c := meta.FindStatusCondition(op.Status.Conditions, string(vmopcondition.TypeCompleted)); c != nil {
		why = c.Message
	}
	switch op.Status.Phase {
	case v1alpha2.VMOPPhaseCompleted:
		return true, nil
	case v1alpha2.VMOPPhaseFailed:
		return true, fmt.Errorf("%s of VirtualMachine %s/%s failed: %s (kubectl describe vmop %s -n %s)", op.Spec.Type, op.Namespace, op.Spec.VirtualMachineName, why, op.Name, op.Namespace)
	case v1alpha2.VMOPPhaseSuperseded:
		return true, fmt.Errorf("%s of VirtualMachine %s/%s was superseded: %s", op.Spec.Type, op.Namespace, op.Spec.VirtualMachineName, why)
	case v1alpha2.VMOPPhaseTerminating:
		return true, fmt.Errorf("VirtualMachineOperation %s/%s is being deleted before it ended", op.Namespace, op.Name)
	}
	return false, nil
}

// Waiter follows operations.
type Waiter struct {
	Ops client.VirtualMachineOperationsGetter
	VMs client.VirtualMachinesGetter
	// Interval is the time between two looks.
	Interval time.Duration
	// Report gets each new progress line.
	Report func(line string)
}

// Wait looks at the operation every Interval until it ends or ctx does, reporting each change of
// its Progress; it returns the operation as it ended, and Ended's error.
func (w Waiter) Wait(ctx context.Context, namespace, name string) (*v1alpha2.VirtualMachineOperation, error) {
	tick := time.NewTicker(w.Interval)
	defer tick.Stop()
	last := ""
	for {
		op, err := w.Ops.VirtualMachineOperations(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get VirtualMachineOperation %s/%s: %w", namespace, name, err)
		}
		var vmPhase v1alpha2.MachinePhase
		if vm, err := w.VMs.VirtualMachines(namespace).Get(ctx, op.Spec.VirtualMachineName, metav1.GetOptions{}); err == nil {
			vmPhase = vm.Status.Phase
		}
		if line := Progress(op, vmPhase); line != last {
			w.Report(line)
			last = line
		}
		if done, err := Ended(op); done {
			return op, err
		}
		select {
		case <-ctx.Done():
			return op, fmt.Errorf("VirtualMachineOperation %s/%s has not ended (%s): %w; follow it with kubectl get vmop %s -n %s -w", namespace, name, op.Status.Phase, ctx.Err(), name, namespace)
		case <-tick.C:
		}
	}
}
