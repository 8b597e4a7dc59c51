// Package heartbeat tells the cluster that virt-handler runs on a node: it stamps the node's
// kubevirt.io/heartbeat annotation and keeps kubevirt.io/schedulable=true while the handler lives,
// and sets it to false when the handler stops, so that no new VM is placed where nothing would
// run it. virt-controller's node controller reads both.
package heartbeat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Patch is the merge patch of one beat: the time and whether VMs may be placed.
func Patch(now time.Time, schedulable bool, labels map[string]string) ([]byte, error) {
	l := map[string]string{kubevirtv1.NodeSchedulable: fmt.Sprint(schedulable)}
	for k, v := range labels {
		l[k] = v
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"labels":      l,
			"annotations": map[string]string{kubevirtv1.VirtHandlerHeartbeat: now.UTC().Format(time.RFC3339)},
		},
	})
}

// Beater stamps one node.
type Beater struct {
	Kube     kubernetes.Interface
	NodeName string
	Interval time.Duration
	// Labels are added on every beat (the node labeller's CPU labels).
	Labels map[string]string
	Log    *slog.Logger
}

func (b *Beater) beat(ctx context.Context, schedulable bool) error {
	p, err := Patch(time.Now(), schedulable, b.Labels)
	if err != nil {
		return err
	}
	if _, err := b.Kube.CoreV1().Nodes().Patch(ctx, b.NodeName, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("heartbeat on node %s: %w", b.NodeName, err)
	}
	return nil
}

// Run beats until ctx ends, then marks the node unschedulable. It implements the
// controller-runtime Runnable signature.
func (b *Beater) Run(ctx context.Context) error {
	t := time.NewTicker(b.Interval)
	defer t.Stop()
	for {
		if err := b.beat(ctx, true); err != nil {
			b.Log.Warn("heartbeat failed", "err", err)
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.beat(stop, false); err != nil {
				b.Log.Warn("could not mark the node unschedulable", "err", err)
			}
			return nil
		case <-t.C:
		}
	}
}
