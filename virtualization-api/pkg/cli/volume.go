package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmbdacondition"
)

// The hotplug commands make and delete VirtualMachineBlockDeviceAttachments rather than call the
// addvolume and removevolume subresources: an attachment names the friendly disk (the
// subresources take KubeVirt's volume options, the core's names), its controller checks the disk
// and the machine, protects the disk while attached and reports the result, and the attachment
// outlives the command (a restart of the VM keeps it).

// volumeKinds are the kinds a disk to plug may be, by the names the command takes.
var volumeKinds = map[string]v1alpha2.VMBDAObjectRefKind{
	"virtualdisk": v1alpha2.VMBDAObjectRefKindVirtualDisk, "vd": v1alpha2.VMBDAObjectRefKindVirtualDisk,
	"virtualimage": v1alpha2.VMBDAObjectRefKindVirtualImage, "vi": v1alpha2.VMBDAObjectRefKindVirtualImage,
	"clustervirtualimage": v1alpha2.VMBDAObjectRefKindClusterVirtualImage, "cvi": v1alpha2.VMBDAObjectRefKindClusterVirtualImage,
}

func parseVolumeKind(s string) (v1alpha2.VMBDAObjectRefKind, error) {
	if k, ok := volumeKinds[strings.ToLower(s)]; ok {
		return k, nil
	}
	return "", usagef("--kind %q is not VirtualDisk (vd), VirtualImage (vi) or ClusterVirtualImage (cvi)", s)
}

// attachmentName is the attachment of a disk to a VM the command makes, unless --name says.
func attachmentName(vm string, kind v1alpha2.VMBDAObjectRefKind, disk string) string {
	prefix := map[v1alpha2.VMBDAObjectRefKind]string{
		v1alpha2.VMBDAObjectRefKindVirtualDisk: "vd", v1alpha2.VMBDAObjectRefKindVirtualImage: "vi", v1alpha2.VMBDAObjectRefKindClusterVirtualImage: "cvi",
	}[kind]
	return vm + "-" + prefix + "-" + disk
}

type volumeFlags struct {
	kind    string
	wait    bool
	timeout time.Duration
}

func (f *volumeFlags) add(cmd *cobra.Command, waitFor string) {
	cmd.Flags().StringVar(&f.kind, "kind", "VirtualDisk", "kind of the disk: VirtualDisk (vd), VirtualImage (vi) or ClusterVirtualImage (cvi)")
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait until the disk is "+waitFor)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 3*time.Minute, "with --wait: how long to wait")
}

// check is the disk's kind, or a usage error for a bad flag.
func (f *volumeFlags) check() (v1alpha2.VMBDAObjectRefKind, error) {
	if f.timeout <= 0 {
		return "", usagef("--timeout must be positive, got %s", f.timeout)
	}
	return parseVolumeKind(f.kind)
}

func newAddVolumeCommand(e *env) *cobra.Command {
	var f volumeFlags
	var name string
	cmd := &cobra.Command{
		Use:   "addvolume VM DISK",
		Short: "Hot-plug a disk into a running VirtualMachine (a VirtualMachineBlockDeviceAttachment)",
		Long: `Hot-plug a VirtualDisk, VirtualImage or ClusterVirtualImage into a running VirtualMachine by
creating a VirtualMachineBlockDeviceAttachment (vmbda); its controller plugs the disk through
virtualization-api and protects it while it is attached. removevolume unplugs it.`,
		Example: fmt.Sprintf("  %[1]s addvolume myvm data --wait\n  %[1]s addvolume myvm tools-iso --kind cvi", e.name),
		Args:    args("VM", "DISK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := f.check()
			if err != nil {
				return err
			}
			ns, virt, err := e.friendly()
			if err != nil {
				return err
			}
			if name == "" {
				name = attachmentName(args[0], kind, args[1])
			}
			bdas := virt.VirtualMachineBlockDeviceAttachments(ns)
			bda := &v1alpha2.VirtualMachineBlockDeviceAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: v1alpha2.VirtualMachineBlockDeviceAttachmentSpec{
					VirtualMachineName: args[0], BlockDeviceRef: v1alpha2.VMBDAObjectRef{Kind: kind, Name: args[1]},
				},
			}
			if _, err := bdas.Create(cmd.Context(), bda, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create VirtualMachineBlockDeviceAttachment %s/%s: %w", ns, name, err)
			}
			fmt.Fprintf(e.streams.Out, "virtualmachineblockdeviceattachment/%s created: %s %s into VirtualMachine %s/%s\n", name, kind, args[1], ns, args[0])
			if !f.wait {
				fmt.Fprintf(e.streams.Out, "follow it with: kubectl get vmbda %s -n %s -w\n", name, ns)
				return nil
			}
			return waitFor(cmd.Context(), e, f.timeout, func(ctx context.Context) (bool, error) {
				got, err := bdas.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, fmt.Errorf("get VirtualMachineBlockDeviceAttachment %s/%s: %w", ns, name, err)
				}
				switch got.Status.Phase {
				case v1alpha2.BlockDeviceAttachmentPhaseAttached:
					fmt.Fprintf(e.streams.Out, "%s %s attached to VirtualMachine %s/%s\n", kind, args[1], ns, args[0])
					return true, nil
				case v1alpha2.BlockDeviceAttachmentPhaseFailed:
					why := ""
					if c := meta.FindStatusCondition(got.Status.Conditions, string(vmbdacondition.TypeAttached)); c != nil {
						why = c.Message
					}
					return false, fmt.Errorf("attaching %s %s failed: %s (kubectl describe vmbda %s -n %s; delete it with %s removevolume %s %s)", kind, args[1], why, name, ns, e.name, args[0], args[1])
				}
				return false, nil
			})
		},
	}
	f.add(cmd, "attached")
	cmd.Flags().StringVar(&name, "name", "", "name of the attachment (default VM-KIND-DISK)")
	return cmd
}

func newRemoveVolumeCommand(e *env) *cobra.Command {
	var f volumeFlags
	cmd := &cobra.Command{
		Use:   "removevolume VM DISK",
		Short: "Unplug a hot-plugged disk from a VirtualMachine (deletes its attachment)",
		Long: `Unplug a disk addvolume (or any VirtualMachineBlockDeviceAttachment) plugged into the
VirtualMachine: deletes the attachments of that disk to that machine.`,
		Example: fmt.Sprintf("  %[1]s removevolume myvm data --wait", e.name),
		Args:    args("VM", "DISK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := f.check()
			if err != nil {
				return err
			}
			ns, virt, err := e.friendly()
			if err != nil {
				return err
			}
			bdas := virt.VirtualMachineBlockDeviceAttachments(ns)
			list, err := bdas.List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list VirtualMachineBlockDeviceAttachments of %s: %w", ns, err)
			}
			var names []string
			for _, b := range list.Items {
				if b.Spec.VirtualMachineName == args[0] && b.Spec.BlockDeviceRef.Kind == kind && b.Spec.BlockDeviceRef.Name == args[1] {
					names = append(names, b.Name)
				}
			}
			if len(names) == 0 {
				return fmt.Errorf("no VirtualMachineBlockDeviceAttachment plugs %s %s into VirtualMachine %s/%s (kubectl get vmbda -n %s lists them)", kind, args[1], ns, args[0], ns)
			}
			for _, n := range names {
				if err := bdas.Delete(cmd.Context(), n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("delete VirtualMachineBlockDeviceAttachment %s/%s: %w", ns, n, err)
				}
				fmt.Fprintf(e.streams.Out, "virtualmachineblockdeviceattachment/%s deleted\n", n)
			}
			if !f.wait {
				return nil
			}
			return waitFor(cmd.Context(), e, f.timeout, func(ctx context.Context) (bool, error) {
				for _, n := range names {
					if _, err := bdas.Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return false, nil
					}
				}
				fmt.Fprintf(e.streams.Out, "%s %s unplugged from VirtualMachine %s/%s\n", kind, args[1], ns, args[0])
				return true, nil
			})
		},
	}
	f.add(cmd, "unplugged")
	return cmd
}

// waitFor polls done every pollInterval until it says so, fails, or the timeout ends.
func waitFor(ctx context.Context, e *env, timeout time.Duration, done wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, e.pollInterval, timeout, true, done)
	if wait.Interrupted(err) {
		return fmt.Errorf("not done after %s: %w", timeout, err)
	}
	return err
}
