package scrapeconfig

import (
	"context"
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

// Write generates the configuration of the namespace's ServiceMonitors into path and the files
// it reads (the CAs) into env.FilesDir, from the cluster's Secrets and ConfigMaps.
func Write(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, namespace string, env Env, path string) error {
	sms, err := Load(ctx, dyn, namespace)
	if err != nil {
		return err
	}
	cfg, files, err := Generate(sms, env)
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := fetch(ctx, kube, f)
		if err != nil {
			return err
		}
		if err := writeFile(f.Path, data, 0o600); err != nil {
			return err
		}
	}
	out, err := cfg.YAML()
	if err != nil {
		return fmt.Errorf("marshal the scrape configuration: %w", err)
	}
	return writeFile(path, out, 0o644)
}

func fetch(ctx context.Context, kube kubernetes.Interface, f File) ([]byte, error) {
	if f.Kind == "ConfigMap" {
		cm, err := kube.CoreV1().ConfigMaps(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", f.Namespace, f.Name, err)
		}
		if v, ok := cm.Data[f.Key]; ok {
			return []byte(v), nil
		}
		return nil, fmt.Errorf("ConfigMap %s/%s has no key %s", f.Namespace, f.Name, f.Key)
	}
	s, err := kube.CoreV1().Secrets(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", f.Namespace, f.Name, err)
	}
	if v, ok := s.Data[f.Key]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("Secret %s/%s has no key %s", f.Namespace, f.Name, f.Key)
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
