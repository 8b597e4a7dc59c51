package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/proc"
	"github.com/d8virt/devstack/testenv"
)

// footprint is what a launcher Pod holds on its node: its network namespace (and every process
// in it: the launcher, its libvirtd and virtlogd, QEMU) and its directory, which has the
// launcher's sockets and the libvirt state.
type footprint struct {
	pod     string
	netns   string
	netnsID string
	dir     string
}

// launcherFootprint finds the footprint of the VMI's launcher Pod.
func launcherFootprint(t *testing.T, c *cluster, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance) footprint {
	t.Helper()
	var pods corev1.PodList
	if err := kc.List(testenv.Context(t), &pods, client.InNamespace(vmi.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("launcher pod of %s: %v (%d pods)", vmi.Name, err, len(pods.Items))
	}
	pod := &pods.Items[0]
	netns := filepath.Join("/run/netns", localnet.NetNSPrefix+nodeagent.NetHostName(pod.UID))
	var st syscall.Stat_t
	if err := syscall.Stat(netns, &st); err != nil {
		t.Fatalf("launcher pod's network namespace: %v", err)
	}
	dir := nodeagent.Layout{Root: moduletest.NodeRoot(c.stack, pod.Spec.NodeName)}.PodDir(pod.UID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("launcher pod's directory: %v", err)
	}
	return footprint{pod: pod.Name, netns: netns, netnsID: fmt.Sprintf("net:[%d]", st.Ino), dir: dir}
}

// gone reports what is left of the footprint.
func (f footprint) gone(context.Context) error {
	if _, err := os.Stat(f.netns); err == nil {
		return fmt.Errorf("pod %s: network namespace %s left", f.pod, f.netns)
	}
	if _, err := os.Stat(f.dir); err == nil {
		return fmt.Errorf("pod %s: directory %s (sockets, libvirt state) left", f.pod, f.dir)
	}
	pids, _ := proc.InNamespace("net", f.netnsID)
	var left []string
	for _, pid := range pids {
		comm, _ := proc.Comm(pid)
		left = append(left, fmt.Sprintf("%d %s", pid, comm))
	}
	if len(left) > 0 {
		return fmt.Errorf("pod %s: processes left in its network namespace: %v", f.pod, left)
	}
	return nil
}
