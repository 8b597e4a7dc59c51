package vmimetrics

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// Connections are virt-handler's connections to the launchers (*launcherconn.Manager).
type Connections interface {
	// Client is the connection to the launcher of a Pod, nil without one.
	Client(podUID types.UID) *launcherapi.Client
}

// NodeLister lists the VMIs Running on a node from virt-handler's cache, with the connections the
// handler keeps to their launchers. A VMI whose launcher the handler has no connection to (yet) is
// left out: a scrape never opens one.
type NodeLister struct {
	reader   client.Reader
	nodeName string
	conns    Connections
}

// NewNodeLister lists the VMIs of node nodeName in reader, asking their launchers through conns.
func NewNodeLister(reader client.Reader, nodeName string, conns Connections) *NodeLister {
	return &NodeLister{reader: reader, nodeName: nodeName, conns: conns}
}

// Instances implements Lister.
func (l *NodeLister) Instances(ctx context.Context) ([]Instance, error) {
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := l.reader.List(ctx, &vmis, client.MatchingLabels{kubevirtv1.NodeNameLabel: l.nodeName}); err != nil {
		return nil, fmt.Errorf("list VMIs: %w", err)
	}
	var out []Instance
	for i := range vmis.Items {
		v := &vmis.Items[i]
		if v.Status.NodeName != l.nodeName || v.Status.Phase != kubevirtv1.Running {
			continue
		}
		pods, err := launcherpod.List(ctx, l.reader, v, func(p *corev1.Pod) bool {
			return p.Spec.NodeName == l.nodeName && p.Status.Phase == corev1.PodRunning
		})
		if err != nil {
			return nil, fmt.Errorf("list the launcher pods of %s/%s: %w", v.Namespace, v.Name, err)
		}
		pod := launcherpod.Current(pods)
		if pod == nil {
			continue
		}
		c := l.conns.Client(pod.UID)
		if c == nil {
			continue
		}
		out = append(out, Instance{Node: l.nodeName, Namespace: v.Namespace, Name: v.Name, Stats: c.DomainStats})
	}
	return out, nil
}
