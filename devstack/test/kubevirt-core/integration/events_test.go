package integration

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// wantEvent is an event the controllers record, as the VM's user sees it through a rewriter.
type wantEvent struct {
	kind, name, reason, notePrefix string
}

// controllerEvents waits for the events through the sidecar (kubevirt.io kinds in `regarding`)
// and checks that the cluster stores them with the renamed kinds.
func controllerEvents(fx *fixture, ns string, want ...wantEvent) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := fx.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, w := range want {
			found := false
			for _, e := range list.Items {
				if e.Regarding.APIVersion == "kubevirt.io/v1" && e.Regarding.Kind == w.kind && e.Regarding.Name == w.name &&
					e.Reason == w.reason && strings.HasPrefix(e.Note, w.notePrefix) {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("no %s event for %s %s with a note starting %q (%d events)", w.reason, w.kind, w.name, w.notePrefix, len(list.Items))
			}
		}
		stored, err := fx.env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range stored.Items {
			if err := storedRenamed(e); err != nil {
				return err
			}
		}
		return nil
	}
}

func storedRenamed(e corev1.Event) error {
	o := e.InvolvedObject
	if strings.Contains(o.APIVersion, "kubevirt.io") || (o.APIVersion == "internal.virtualization.deckhouse.io/v1") != strings.HasPrefix(o.Kind, "InternalVirtualization") {
		return fmt.Errorf("event %s stored about %s %s", e.Name, o.APIVersion, o.Kind)
	}
	return nil
}
