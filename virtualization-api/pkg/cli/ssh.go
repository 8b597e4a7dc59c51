package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sshTarget is a VirtualMachine as ssh and scp reach it: a user of its guest, the machine in a
// namespace, and the guest's port.
type sshTarget struct {
	user, vm, namespace string
	port                int
}

// host is the name ssh knows the machine by (its known_hosts entry): VM.NAMESPACE.
func (t sshTarget) host() string {
	if t.user == "" {
		return t.vm + "." + t.namespace
	}
	return t.user + "@" + t.vm + "." + t.namespace
}

// parseUserVM reads [USER@]VM.
func parseUserVM(s string) (user, vm string, err error) {
	user, vm, found := strings.Cut(s, "@")
	if !found {
		user, vm = "", user
	}
	if vm == "" || found && user == "" {
		return "", "", usagef("%q is not [USER@]VM", s)
	}
	return user, vm, nil
}

// proxyCommand is the ssh ProxyCommand that relays the target's port with this binary (self)
// under the kubeconfig flags the user gave (kubeFlags, --name=value each), quoted for the shell
// ssh runs it with.
func proxyCommand(self string, kubeFlags []string, t sshTarget) string {
	words := append([]string{self, "port-forward", "--stdio", "--namespace=" + t.namespace}, kubeFlags...)
	words = append(words, t.vm, strconv.Itoa(t.port))
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sshOptions are the options ssh and scp both get: the proxy and the identity file.
func sshOptions(self string, kubeFlags []string, t sshTarget, identity string) []string {
	out := []string{"-o", "ProxyCommand=" + proxyCommand(self, kubeFlags, t)}
	if identity != "" {
		out = append(out, "-i", identity)
	}
	return out
}

// sshArgs are ssh's arguments: the options, the target and what follows it (ssh's own options
// and a command).
func sshArgs(self string, kubeFlags []string, t sshTarget, identity string, rest []string) []string {
	return append(append(sshOptions(self, kubeFlags, t, identity), t.host()), rest...)
}

// scpArgs are scp's arguments for src and dst, one of them [USER@]VM:PATH.
func scpArgs(self string, kubeFlags []string, namespace string, port int, identity string, recursive bool, src, dst string) ([]string, error) {
	var t sshTarget
	remotes := 0
	paths := []string{src, dst}
	for i, p := range paths {
		spec, path, ok := strings.Cut(p, ":")
		if !ok || strings.Contains(spec, "/") {
			continue
		}
		user, vm, err := parseUserVM(spec)
		if err != nil {
			return nil, err
		}
		t = sshTarget{user: user, vm: vm, namespace: namespace, port: port}
		paths[i] = t.host() + ":" + path
		remotes++
	}
	if remotes != 1 {
		return nil, usagef("scp copies between this machine and one VM: exactly one of %q and %q must be [USER@]VM:PATH", src, dst)
	}
	out := sshOptions(self, kubeFlags, t, identity)
	if recursive {
		out = append(out, "-r")
	}
	return append(out, paths...), nil
}

// kubeFlags are the root's persistent flags the user set, as --name=value, for a child that runs
// this binary again.
func kubeFlags(cmd *cobra.Command) []string {
	var out []string
	cmd.Root().PersistentFlags().Visit(func(f *pflag.Flag) {
		if f.Name != "namespace" {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

func newSSHCommand(e *env) *cobra.Command {
	var identity, user string
	var port int
	cmd := &cobra.Command{
		Use:   "ssh [USER@]VM [-- SSH-OPTIONS... [COMMAND]]",
		Short: "Open an ssh session to a VirtualMachine's guest through the port-forward",
		Long: `Run the system's ssh to the VirtualMachine's guest, with this command's port-forward --stdio
as the ProxyCommand: no address of the guest needs to be reachable. ssh's host name is
VM.NAMESPACE (its known_hosts entry). The exit code is ssh's.`,
		Example: fmt.Sprintf("  %[1]s ssh cloud@myvm\n  %[1]s ssh myvm -l cloud -i ~/.ssh/id_ed25519 -- uname -a", e.name),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("%s needs [USER@]VM: see %s --help", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		ValidArgsFunction: completeVMs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return usagef("--port %d is not a port from 1 to 65535", port)
			}
			u, vm, err := parseUserVM(args[0])
			if err != nil {
				return err
			}
			if user != "" {
				u = user
			}
			ns, self, err := proxied(e)
			if err != nil {
				return err
			}
			t := sshTarget{user: u, vm: vm, namespace: ns, port: port}
			return runChild(cmd.Context(), e, "ssh", sshArgs(self, kubeFlags(cmd), t, identity, args[1:]))
		},
	}
	cmd.Flags().StringVarP(&user, "username", "l", "", "user of the guest (else USER@, else ssh's default)")
	cmd.Flags().StringVarP(&identity, "identity-file", "i", "", "private key for ssh")
	cmd.Flags().IntVar(&port, "port", 22, "the guest's ssh port")
	return cmd
}

func newSCPCommand(e *env) *cobra.Command {
	var identity string
	var port int
	var recursive bool
	cmd := &cobra.Command{
		Use:   "scp SRC DST",
		Short: "Copy files to or from a VirtualMachine's guest with the system's scp",
		Long: `Run the system's scp between this machine and the VirtualMachine's guest, with this command's
port-forward --stdio as the ProxyCommand. One of SRC and DST is [USER@]VM:PATH. The exit code is
scp's.`,
		Example: fmt.Sprintf("  %[1]s scp ./app.tar cloud@myvm:/tmp/\n  %[1]s scp -r cloud@myvm:/var/log ./logs", e.name),
		Args:    args("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return usagef("--port %d is not a port from 1 to 65535", port)
			}
			ns, self, err := proxied(e)
			if err != nil {
				return err
			}
			a, err := scpArgs(self, kubeFlags(cmd), ns, port, identity, recursive, args[0], args[1])
			if err != nil {
				return err
			}
			return runChild(cmd.Context(), e, "scp", a)
		},
	}
	cmd.Flags().StringVarP(&identity, "identity-file", "i", "", "private key for ssh")
	cmd.Flags().IntVar(&port, "port", 22, "the guest's ssh port")
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "copy directories")
	return cmd
}

// proxied is the namespace and this binary's path, for the ProxyCommand.
func proxied(e *env) (ns, self string, err error) {
	if ns, err = e.clients.Namespace(); err != nil {
		return "", "", err
	}
	if self, err = os.Executable(); err != nil {
		return "", "", fmt.Errorf("this binary's path for the ProxyCommand: %w", err)
	}
	return ns, self, nil
}

// runChild runs the system's program with args on the command's streams; its exit code becomes
// the command's.
func runChild(ctx context.Context, e *env, program string, args []string) error {
	path, err := exec.LookPath(program)
	if err != nil {
		return fmt.Errorf("%s: %w (install OpenSSH's client, e.g. apt-get install openssh-client)", program, err)
	}
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin, c.Stdout, c.Stderr = e.streams.In, e.streams.Out, e.streams.ErrOut
	return childResult(program, c.Run())
}

// childResult is the command's result from a child's: its exit code, or why it did not run.
func childResult(program string, err error) error {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exitError{fmt.Errorf("%s exited with %d", program, exit.ExitCode()), exit.ExitCode()}
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", program, err)
	}
	return nil
}
