package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/d8virt/virtualization-api/pkg/cli/debuginfo"
)

func newDebugInfoCommand(e *env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "collect-debug-info VM",
		Short: "Write a VirtualMachine's objects, events and launcher logs into one tar.gz",
		Long: `Write what explains a VirtualMachine's state into one tar.gz: the machine, its operations,
attachments and disks, the core's internal VM and VMI, the launcher Pods and their logs, and the
events about them. What the kubeconfig may not read is listed in errors.txt in the archive.`,
		Example:           fmt.Sprintf("  %[1]s collect-debug-info myvm\n  %[1]s collect-debug-info myvm -o - | tar tz", e.name),
		Args:              args("VM"),
		ValidArgsFunction: completeVMs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := e.clients.Namespace()
			if err != nil {
				return err
			}
			virt, err := e.clients.Virtualization()
			if err != nil {
				return err
			}
			kube, err := e.clients.Kube()
			if err != nil {
				return err
			}
			dyn, err := e.clients.Dynamic()
			if err != nil {
				return err
			}
			if output == "" {
				output = fmt.Sprintf("%s-%s-debug.tar.gz", ns, args[0])
			}
			var w io.Writer = e.streams.Out
			if output != "-" {
				f, err := os.Create(output)
				if err != nil {
					return fmt.Errorf("create the archive: %w", err)
				}
				defer f.Close()
				w = f
			}
			c := debuginfo.Collector{Virt: virt, Kube: kube, Dynamic: dyn, Now: time.Now}
			if err := c.Collect(cmd.Context(), w, ns, args[0]); err != nil {
				return err
			}
			if output != "-" {
				fmt.Fprintf(e.streams.ErrOut, "wrote %s (list it with tar tzf %s)\n", output, output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `archive to write ("-": stdout; default NAMESPACE-VM-debug.tar.gz)`)
	return cmd
}
