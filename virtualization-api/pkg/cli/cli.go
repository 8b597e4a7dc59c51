// Package cli is the command-line client of the friendly VirtualMachines, d8v (and the kubectl
// plugin kubectl-virtualization, the same binary under another name): their console, VNC and
// ports through virtualization-api, ssh and scp through the port-forward, the lifecycle through
// VirtualMachineOperations, disk hotplug through VirtualMachineBlockDeviceAttachments and a debug
// archive. It follows kubectl's conventions (--kubeconfig, --context, -n, KUBECONFIG).
package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/d8virt/api/client/clientset/versioned"
	virtclient "github.com/d8virt/api/client/clientset/versioned/typed/core/v1alpha2"
)

// PluginBinary is the binary's name as a kubectl plugin: `kubectl virtualization ...`.
const PluginBinary = "kubectl-virtualization"

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Clients are the cluster's clients of the kubeconfig the flags chose.
type Clients interface {
	Namespace() (string, error)
	RESTConfig() (*rest.Config, error)
	Virtualization() (versioned.Interface, error)
	Kube() (kubernetes.Interface, error)
	Dynamic() (dynamic.Interface, error)
}

// usageError is a bad command line: the exit code is ExitUsage.
type usageError struct{ error }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// env is what every command gets.
type env struct {
	name    string
	streams genericiooptions.IOStreams
	clients Clients
	// flags are the kubeconfig flags as the user gave them, passed on to the ProxyCommand of ssh.
	flags *genericclioptions.ConfigFlags
	// pollInterval is the time between two looks at an object a command waits for.
	pollInterval time.Duration
}

// CommandName is how the binary is invoked: "kubectl virtualization" under the plugin's name,
// else the binary's base name.
func CommandName(arg0 string) string {
	base := filepath.Base(arg0)
	if base == PluginBinary {
		return "kubectl virtualization"
	}
	return base
}

// NewCommand is the client's root command as arg0 names it, with the kubeconfig flags, on the
// given streams.
func NewCommand(arg0 string, streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	return newRoot(&env{name: CommandName(arg0), streams: streams, clients: configClients{flags}, flags: flags, pollInterval: time.Second})
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   e.name,
		Short: "Work with the VirtualMachines of virtualization.deckhouse.io",
		Long: `Work with the VirtualMachines of virtualization.deckhouse.io: their serial console, VNC and
ports (through virtualization-api), ssh and scp, start, stop, restart, migrate and evict
(VirtualMachineOperations), disk hotplug (VirtualMachineBlockDeviceAttachments), and a debug
archive.

Exit codes: 0 done, 1 failed (the message says why and what to do next), 2 bad arguments.`,
		Example:       strings.ReplaceAll("  NAME console myvm -n prod\n  NAME stop myvm --wait\n  NAME ssh cloud@myvm -i ~/.ssh/id_ed25519\n  source <(NAME completion bash)", "NAME", e.name),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q: see %s --help", args[0], e.name)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(e.streams.In)
	root.SetOut(e.streams.Out)
	root.SetErr(e.streams.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef("%w: see %s --help", err, cmd.CommandPath())
	})
	e.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newConsoleCommand(e), newVNCCommand(e), newPortForwardCommand(e), newSSHCommand(e), newSCPCommand(e),
		newAddVolumeCommand(e), newRemoveVolumeCommand(e), newDebugInfoCommand(e),
	)
	root.AddCommand(newOperationCommands(e)...)
	return root
}

// Execute runs the command with ctx and prints its error; the result is the exit code. A usage
// error that does not name the help says where it is.
func Execute(ctx context.Context, cmd *cobra.Command) int {
	ran, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitError
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ue):
		code = ExitUsage
		if !strings.Contains(err.Error(), "--help") {
			err = fmt.Errorf("%w: see %s --help", err, ran.CommandPath())
		}
	case errors.As(err, &ee):
		code = ee.code
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "error: %v\n", err)
	return code
}

// exitError is a child's exit code to pass on (ssh's, scp's).
type exitError struct {
	error
	code int
}

// args checks a command's positional arguments: exactly n of them, named by what.
func args(what ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(what) {
			return usagef("%s needs %s, got %d argument(s): see %s --help", cmd.CommandPath(), strings.Join(what, " "), len(args), cmd.CommandPath())
		}
		return nil
	}
}

// friendly is the namespace and the client of the friendly API.
func (e *env) friendly() (string, virtclient.VirtualizationV1alpha2Interface, error) {
	ns, err := e.clients.Namespace()
	if err != nil {
		return "", nil, err
	}
	virt, err := e.clients.Virtualization()
	if err != nil {
		return "", nil, err
	}
	return ns, virt.VirtualizationV1alpha2(), nil
}

// configClients are the clients of the kubeconfig flags (and KUBECONFIG).
type configClients struct {
	flags *genericclioptions.ConfigFlags
}

func (c configClients) Namespace() (string, error) {
	ns, _, err := c.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace of the kubeconfig: %w", err)
	}
	return ns, nil
}

func (c configClients) RESTConfig() (*rest.Config, error) {
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w (give one with --kubeconfig or KUBECONFIG)", err)
	}
	return cfg, nil
}

func (c configClients) Virtualization() (versioned.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return versioned.NewForConfig(cfg)
}

func (c configClients) Kube() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (c configClients) Dynamic() (dynamic.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}
