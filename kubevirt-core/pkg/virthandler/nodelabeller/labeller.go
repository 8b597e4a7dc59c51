// Package nodelabeller keeps virt-handler's Node labelled with what the node offers guests, as
// KubeVirt's node labeller does: the usable CPU models, the CPU features, the host-model CPU
// with its vendor and required features, the TSC timer, the machine types, SEV and realtime.
// The data comes from the files the handler Pod's init container (virt-launcher
// --node-labeller-dir) wrote with a libvirtd of its own, read by nodecaps.
package nodelabeller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/nodecaps"
)

// Labeller keeps the Node's labels level-based: every round computes the full set, adds what is
// missing, changes what differs and removes the stale ones of its own keys, so a label someone
// removed or a model that stopped being usable is right again within an Interval (at once when
// the change shows on a watch of the Node).
type Labeller struct {
	Kube     kubernetes.Interface
	NodeName string
	Caps     *nodecaps.Capabilities
	// Interval between rounds; a failed round is retried sooner.
	Interval time.Duration
	Log      *slog.Logger
	// RealtimeFile holds kernel.sched_rt_runtime_us; -1 means realtime tasks are not throttled.
	RealtimeFile string
}

// Run labels the node until ctx ends: a round every Interval, and one as soon as a watch of the
// Node shows labels that are not right (someone removed or added one of the labeller's keys).
func (l *Labeller) Run(ctx context.Context) error {
	retry := 5 * time.Second
	drift := make(chan struct{}, 1)
	go l.watchDrift(ctx, drift, retry)
	for {
		wait := l.Interval
		if err := l.Sync(ctx); err != nil {
			l.Log.Error("node labeller", "err", err)
			wait = retry
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		case <-drift:
		}
	}
}

// watchDrift watches the Node and signals drift whenever its labels need a change (the
// heartbeat's status updates need none, so they cost no extra round). A watch that ends is
// opened again after retry.
func (l *Labeller) watchDrift(ctx context.Context, drift chan<- struct{}, retry time.Duration) {
	for ctx.Err() == nil {
		w, err := l.Kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + l.NodeName})
		if err != nil {
			l.Log.Warn("node labeller: watch the node", "err", err)
		} else {
			for ev := range w.ResultChan() {
				node, ok := ev.Object.(*corev1.Node)
				if !ok || len(Changes(node.Labels, Labels(l.Caps, nil, l.realtime()))) == 0 {
					continue
				}
				if _, skip := node.Annotations[kubevirtv1.LabellerSkipNodeAnnotation]; skip {
					continue
				}
				select {
				case drift <- struct{}{}:
				default:
				}
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// Sync labels the node once. A node annotated with KubeVirt's skip-node annotation is left alone.
func (l *Labeller) Sync(ctx context.Context) error {
	node, err := l.Kube.CoreV1().Nodes().Get(ctx, l.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s: %w", l.NodeName, err)
	}
	if _, skip := node.Annotations[kubevirtv1.LabellerSkipNodeAnnotation]; skip {
		return nil
	}
	changes := Changes(node.Labels, Labels(l.Caps, nil, l.realtime()))
	if len(changes) == 0 {
		return nil
	}
	// The resourceVersion makes the patch fail rather than undo a change made since the read.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": changes, "resourceVersion": node.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	if _, err := l.Kube.CoreV1().Nodes().Patch(ctx, l.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("label node %s: changed meanwhile, will retry: %w", l.NodeName, err)
		}
		return fmt.Errorf("label node %s: %w", l.NodeName, err)
	}
	removed := 0
	for _, v := range changes {
		if v == nil {
			removed++
		}
	}
	l.Log.Info("node labels updated", "set", len(changes)-removed, "removed", removed)
	return nil
}

func (l *Labeller) realtime() bool {
	if l.RealtimeFile == "" {
		return false
	}
	b, err := os.ReadFile(l.RealtimeFile)
	return err == nil && strings.TrimSpace(string(b)) == "-1"
}
