package core

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
)

// NodeRoot is the state directory of a local node: its kubelet-like root with the pods.
func NodeRoot(s *controlplane.Stack, node string) string {
	return filepath.Join(s.Config().StateDir, "nodes", node)
}

// nodeComponents run one node agent per node. The last one's readiness also installs virt-handler
// and waits until every node's handler beats, so that Up returns with nodes that take VMs.
func nodeComponents(o Options) []controlplane.Component {
	var out []controlplane.Component
	for i, name := range o.Nodes {
		c := controlplane.Component{
			Name: "node-agent-" + name,
			Bin:  filepath.Join(o.BinDir, "node-agent"),
			Args: []string{
				"--kubeconfig", o.Stack.KubeconfigPath(), "--node-name", name,
				"--root-dir", NodeRoot(o.Stack, name), "--bin-dir", o.BinDir, "--image-store", o.ImageStore,
			},
		}
		if i == len(o.Nodes)-1 {
			c.Ready = func(ctx context.Context) error {
				if err := installHandler(ctx, o); err != nil {
					return err
				}
				return nodesSchedulable(ctx, o.Stack, o.Nodes)
			}
		}
		out = append(out, c)
	}
	return out
}

// nodesSchedulable is nil once virt-handler has marked every node as able to run VMs. It reads
// through the rewriter, which shows the label in KubeVirt's name.
func nodesSchedulable(ctx context.Context, s *controlplane.Stack, nodes []string) error {
	kube, err := kubevirtClient(s)
	if err != nil {
		return err
	}
	for _, name := range nodes {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		if n.Labels["kubevirt.io/schedulable"] != "true" {
			return fmt.Errorf("node %s: virt-handler has not marked it schedulable yet (%s)", name, handlerPodState(ctx, kube, name))
		}
	}
	return nil
}

// handlerPodState says how far the node's handler Pod got, for the waiting message.
func handlerPodState(ctx context.Context, kube kubernetes.Interface, node string) string {
	pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=" + handlerName, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) == 0 {
		return "no virt-handler pod"
	}
	p := pods.Items[0]
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil || (cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil) {
			return fmt.Sprintf("pod %s: container %s ended", p.Name, cs.Name)
		}
	}
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
	}
	return fmt.Sprintf("pod %s runs", p.Name)
}
