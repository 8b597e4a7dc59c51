package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-api/pkg/cli/operation"
)

// lifecycle is one command that creates a VirtualMachineOperation.
type lifecycle struct {
	typ   v1alpha2.VMOPType
	short string
	// force is what --force does, "" when the type takes none.
	force string
}

var lifecycles = []lifecycle{
	{v1alpha2.VMOPTypeStart, "Start a stopped VirtualMachine", ""},
	{v1alpha2.VMOPTypeStop, "Stop a VirtualMachine (the guest shuts down by ACPI)", "kill the guest at once instead of shutting it down"},
	{v1alpha2.VMOPTypeRestart, "Restart a VirtualMachine", "kill the guest at once instead of shutting it down"},
	{v1alpha2.VMOPTypeMigrate, "Live-migrate a running VirtualMachine to another node", "slow the guest down until the migration ends"},
	{v1alpha2.VMOPTypeEvict, "Evict a running VirtualMachine from its node (a live migration)", "slow the guest down until the migration ends"},
}

func newOperationCommands(e *env) []*cobra.Command {
	out := make([]*cobra.Command, 0, len(lifecycles))
	for _, l := range lifecycles {
		out = append(out, newOperationCommand(e, l))
	}
	return out
}

func newOperationCommand(e *env, l lifecycle) *cobra.Command {
	verb := strings.ToLower(string(l.typ))
	var wait, force bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   verb + " VM",
		Short: l.short,
		Long: l.short + ` by a VirtualMachineOperation of type ` + string(l.typ) + `.

Without --wait the command returns once the operation is created; with --wait it shows the
operation's progress until it ends and fails when the operation fails.`,
		Example:           fmt.Sprintf("  %[1]s %[2]s myvm\n  %[1]s %[2]s myvm -n prod --wait --timeout 10m", e.name, verb),
		Args:              args("VM"),
		ValidArgsFunction: completeVMs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usagef("--timeout must be positive, got %s", timeout)
			}
			return runOperation(cmd.Context(), e, l.typ, args[0], force, wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "show the operation's progress until it ends")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "with --wait: how long to wait for the operation to end")
	if l.force != "" {
		cmd.Flags().BoolVar(&force, "force", false, l.force)
	}
	return cmd
}

func runOperation(ctx context.Context, e *env, typ v1alpha2.VMOPType, vm string, force, wait bool, timeout time.Duration) error {
	ns, client, err := e.friendly()
	if err != nil {
		return err
	}
	if _, err := client.VirtualMachines(ns).Get(ctx, vm, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("VirtualMachine %s/%s: %w (kubectl get vm -n %s lists them)", ns, vm, err, ns)
	}
	op, err := client.VirtualMachineOperations(ns).Create(ctx, operation.New(ns, vm, typ, force), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the %s operation of VirtualMachine %s/%s: %w", typ, ns, vm, err)
	}
	fmt.Fprintf(e.streams.Out, "virtualmachineoperation/%s created: %s of VirtualMachine %s/%s\n", op.Name, typ, ns, vm)
	if !wait {
		fmt.Fprintf(e.streams.Out, "follow it with: kubectl get vmop %s -n %s -w\n", op.Name, ns)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := operation.Waiter{Ops: client, VMs: client, Interval: e.pollInterval, Report: func(line string) {
		fmt.Fprintf(e.streams.Out, "%s: %s\n", op.Name, line)
	}}
	if _, err := w.Wait(ctx, ns, op.Name); err != nil {
		return err
	}
	fmt.Fprintf(e.streams.Out, "%s of VirtualMachine %s/%s completed\n", typ, ns, vm)
	return nil
}

// completeVMs completes the first argument with the names of the namespace's VirtualMachines.
func completeVMs(e *env) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, virt, err := e.friendly()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := virt.VirtualMachines(ns).List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, vm := range list.Items {
			if strings.HasPrefix(vm.Name, prefix) {
				names = append(names, vm.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
