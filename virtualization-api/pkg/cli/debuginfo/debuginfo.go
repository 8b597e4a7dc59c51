// Package debuginfo collects what explains a VirtualMachine's state into one tar.gz: the friendly
// objects (the machine, its operations, attachments, disks), the core's internal VM and VMI, the
// launcher Pods and their logs, and the namespace's events about any of them. What cannot be read
// (no rights on the internal group, say) is listed in errors.txt instead of failing the archive.
package debuginfo

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/d8virt/api/client/clientset/versioned"
)

// The core's objects as the cluster holds them (renamed), and how its launcher Pods are marked.
var (
	internalVM  = schema.GroupVersionResource{Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationvirtualmachines"}
	internalVMI = schema.GroupVersionResource{Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationvirtualmachineinstances"}
)

const (
	launcherSelector = "kubevirt.internal.virtualization.deckhouse.io=virt-launcher"
	domainAnnotation = "kubevirt.internal.virtualization.deckhouse.io/domain"
)

// Collector reads through its clients.
type Collector struct {
	Virt    versioned.Interface
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Now stamps the archive's files.
	Now func() time.Time
}

// archive is the tar.gz being written, and what could not be read.
type archive struct {
	tw     *tar.Writer
	at     time.Time
	errors []string
}

func (a *archive) file(name string, data []byte) error {
	if err := a.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: a.at}); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	_, err := a.tw.Write(data)
	return err
}

// object writes o as YAML at name, or notes err.
func (a *archive) object(name string, o any, err error) error {
	if err != nil {
		a.errors = append(a.errors, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	data, err := yaml.Marshal(o)
	if err != nil {
		return fmt.Errorf("marshal %s: %w", name, err)
	}
	return a.file(name, data)
}

// Collect writes the archive of the VirtualMachine ns/vm to w; it fails only when the machine
// itself cannot be read or w cannot be written.
func (c Collector) Collect(ctx context.Context, w io.Writer, ns, vm string) error {
	machine, err := c.Virt.VirtualizationV1alpha2().VirtualMachines(ns).Get(ctx, vm, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("VirtualMachine %s/%s: %w", ns, vm, err)
	}
	gz := gzip.NewWriter(w)
	a := &archive{tw: tar.NewWriter(gz), at: c.Now()}
	// names are the objects whose events count.
	names := map[string]bool{vm: true}
	if err := a.object("virtualmachine.yaml", machine, nil); err != nil {
		return err
	}
	virt := c.Virt.VirtualizationV1alpha2()
	ops, err := virt.VirtualMachineOperations(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		kept := ops.Items[:0]
		for _, op := range ops.Items {
			if op.Spec.VirtualMachineName == vm {
				kept = append(kept, op)
				names[op.Name] = true
			}
		}
		ops.Items = kept
	}
	if err := a.object("virtualmachineoperations.yaml", ops, err); err != nil {
		return err
	}
	bdas, err := virt.VirtualMachineBlockDeviceAttachments(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		kept := bdas.Items[:0]
		for _, b := range bdas.Items {
			if b.Spec.VirtualMachineName == vm {
				kept = append(kept, b)
				names[b.Name] = true
			}
		}
		bdas.Items = kept
	}
	if err := a.object("virtualmachineblockdeviceattachments.yaml", bdas, err); err != nil {
		return err
	}
	for _, ref := range machine.Spec.BlockDeviceRefs {
		if ref.Kind != "VirtualDisk" {
			continue
		}
		names[ref.Name] = true
		vd, err := virt.VirtualDisks(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err := a.object("virtualdisks/"+ref.Name+".yaml", vd, err); err != nil {
			return err
		}
	}
	for file, gvr := range map[string]schema.GroupVersionResource{"internal/virtualmachine.yaml": internalVM, "internal/virtualmachineinstance.yaml": internalVMI} {
		o, err := c.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, vm, metav1.GetOptions{})
		if err := a.object(file, o, err); err != nil {
			return err
		}
	}
	if err := c.launchers(ctx, a, ns, vm, names); err != nil {
		return err
	}
	events, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		kept := events.Items[:0]
		for _, ev := range events.Items {
			if names[ev.InvolvedObject.Name] {
				kept = append(kept, ev)
			}
		}
		events.Items = kept
	}
	if err := a.object("events.yaml", events, err); err != nil {
		return err
	}
	if len(a.errors) > 0 {
		if err := a.file("errors.txt", []byte(strings.Join(a.errors, "\n")+"\n")); err != nil {
			return err
		}
	}
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return gz.Close()
}

// launchers writes the machine's launcher Pods and every container's log.
func (c Collector) launchers(ctx context.Context, a *archive, ns, vm string, names map[string]bool) error {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: launcherSelector})
	if err != nil {
		return a.object("pods", nil, err)
	}
	for _, pod := range pods.Items {
		if pod.Annotations[domainAnnotation] != vm {
			continue
		}
		names[pod.Name] = true
		if err := a.object("pods/"+pod.Name+".yaml", &pod, nil); err != nil {
			return err
		}
		for _, ct := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			name := "logs/" + pod.Name + "/" + ct.Name + ".log"
			data, err := c.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ct.Name}).DoRaw(ctx)
			if err != nil {
				a.errors = append(a.errors, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			if err := a.file(name, data); err != nil {
				return err
			}
		}
	}
	return nil
}
