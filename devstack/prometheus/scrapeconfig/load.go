package scrapeconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Resource is the ServiceMonitors' API resource.
var Resource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// Load reads the ServiceMonitors of a namespace from the cluster.
func Load(ctx context.Context, dyn dynamic.Interface, namespace string) ([]ServiceMonitor, error) {
	list, err := dyn.Resource(Resource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ServiceMonitors in %s: %w", namespace, err)
	}
	out := make([]ServiceMonitor, 0, len(list.Items))
	for _, item := range list.Items {
		data, err := item.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("ServiceMonitor %s/%s: %w", item.GetNamespace(), item.GetName(), err)
		}
		sm, err := Parse(data)
		if err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}

// Clients are the cluster's clients: Operator reads the ServiceMonitors and their CAs, as
// prometheus-operator would with its account; Discovery lists EndpointSlices, Services and Pods,
// as Prometheus would with its own.
type Clients struct {
	Operator  kubernetes.Interface
	Dynamic   dynamic.Interface
	Discovery kubernetes.Interface
}

// Write generates the configuration of a namespace's ServiceMonitors into path, the CA files it
// reads into env.FilesDir and the targets into env.TargetsDir (Discover, once: Follow keeps them
// current). It returns what the configuration reads.
func Write(ctx context.Context, c Clients, namespace string, env Env, path string) (Needs, error) {
	sms, err := Load(ctx, c.Dynamic, namespace)
	if err != nil {
		return Needs{}, err
	}
	cfg, needs, err := Generate(sms, env)
	if err != nil {
		return Needs{}, err
	}
	for _, f := range needs.Files {
		data, err := fetch(ctx, c.Operator, f)
		if err != nil {
			return Needs{}, err
		}
		if err := writeFile(f.Path, data, 0o600); err != nil {
			return Needs{}, err
		}
	}
	if err := Discover(ctx, c.Discovery, needs.Namespaces, env.TargetsDir); err != nil {
		return Needs{}, err
	}
	out, err := cfg.YAML()
	if err != nil {
		return Needs{}, fmt.Errorf("marshal the scrape configuration: %w", err)
	}
	return needs, writeFile(path, out, 0o644)
}

// Discover writes the targets of each namespace (Targets) into its TargetsFile under dir;
// Prometheus rereads a file when it changes, so calling it again refreshes the targets.
func Discover(ctx context.Context, kube kubernetes.Interface, namespaces []string, dir string) error {
	for _, ns := range namespaces {
		eps, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("discover in %s: %w", ns, err)
		}
		svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("discover in %s: %w", ns, err)
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("discover in %s: %w", ns, err)
		}
		data, err := json.Marshal(Targets(ns, eps.Items, svcs.Items, pods.Items))
		if err != nil {
			return fmt.Errorf("discover in %s: %w", ns, err)
		}
		if err := writeTargets(TargetsFile(dir, ns), data); err != nil {
			return err
		}
	}
	return nil
}

func fetch(ctx context.Context, kube kubernetes.Interface, f File) ([]byte, error) {
	if f.Kind == "ConfigMap" {
		cm, err := kube.CoreV1().ConfigMaps(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read the ConfigMap %s/%s: %w", f.Namespace, f.Name, err)
		}
		if v, ok := cm.Data[f.Key]; ok {
			return []byte(v), nil
		}
		return nil, fmt.Errorf("the ConfigMap %s/%s has no key %s", f.Namespace, f.Name, f.Key)
	}
	s, err := kube.CoreV1().Secrets(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the Secret %s/%s: %w", f.Namespace, f.Name, err)
	}
	if v, ok := s.Data[f.Key]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("the Secret %s/%s has no key %s", f.Namespace, f.Name, f.Key)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
