package scrapeconfig

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Follow keeps the targets files of namespaces under dir current, as Prometheus' Kubernetes
// service discovery would: it watches the EndpointSlices, Services and Pods of each namespace
// (informers, with kube: Prometheus' own account) and rewrites a namespace's TargetsFile when
// what it holds changes, settle after the last event. Prometheus rereads a file_sd file when it
// changes, so the targets follow a restarted Pod (its new address) with no reload and no restart.
// It returns when ctx ends, or with the error of a write.
func Follow(ctx context.Context, kube kubernetes.Interface, namespaces []string, dir string, settle time.Duration, log *slog.Logger) error {
	changed := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal(changed) },
		UpdateFunc: func(any, any) { signal(changed) },
		DeleteFunc: func(any) { signal(changed) },
	}
	type lister struct {
		ns   string
		eps  func() ([]*discoveryv1.EndpointSlice, error)
		svcs func() ([]*corev1.Service, error)
		pods func() ([]*corev1.Pod, error)
	}
	var listers []lister
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
		eps, svcs, pods := f.Discovery().V1().EndpointSlices(), f.Core().V1().Services(), f.Core().V1().Pods()
		for _, inf := range []cache.SharedIndexInformer{eps.Informer(), svcs.Informer(), pods.Informer()} {
			if _, err := inf.AddEventHandler(notify); err != nil {
				return fmt.Errorf("follow %s: %w", ns, err)
			}
		}
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("follow %s: the %v cache did not sync: %w", ns, typ, ctx.Err())
			}
		}
		listers = append(listers, lister{ns: ns,
			eps:  func() ([]*discoveryv1.EndpointSlice, error) { return eps.Lister().List(labels.Everything()) },
			svcs: func() ([]*corev1.Service, error) { return svcs.Lister().List(labels.Everything()) },
			pods: func() ([]*corev1.Pod, error) { return pods.Lister().List(labels.Everything()) },
		})
	}
	written := map[string][]byte{}
	for {
		for _, l := range listers {
			eps, err := l.eps()
			if err != nil {
				return err
			}
			svcs, err := l.svcs()
			if err != nil {
				return err
			}
			pods, err := l.pods()
			if err != nil {
				return err
			}
			data, err := json.Marshal(Targets(l.ns, sorted(eps), sorted(svcs), sorted(pods)))
			if err != nil {
				return fmt.Errorf("follow %s: %w", l.ns, err)
			}
			if bytes.Equal(written[l.ns], data) {
				continue
			}
			if err := writeTargets(TargetsFile(dir, l.ns), data); err != nil {
				return err
			}
			written[l.ns] = data
			log.Info("targets written", "namespace", l.ns, "endpointSlices", len(eps), "bytes", len(data))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		// Let a burst of events (a Pod and its slices) settle into one write.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(settle):
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sorted are a lister's objects by name, as values: the file does not change with the order of
// a cache.
func sorted[T any, P interface {
	*T
	GetName() string
}](objs []P) []T {
	slices.SortFunc(objs, func(a, b P) int { return cmp.Compare(a.GetName(), b.GetName()) })
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = *o
	}
	return out
}

// writeTargets writes a targets file aside and renames it: Prometheus never reads half a file.
func writeTargets(path string, data []byte) error {
	if err := writeFile(path+".tmp", data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
