// Package scrapeconfig turns prometheus-operator's ServiceMonitors into the Prometheus scrape
// configuration the operator would generate for them (service discovery role endpointslice, the
// port kept by name, the operator's relabelings for the job, namespace, service, pod, container
// and endpoint labels), for a Prometheus that runs on the local stack as a host process. Debian
// builds Prometheus without the Kubernetes service discovery, so the discovery is done here
// (Discover): it writes the targets with the labels the Kubernetes discovery would give them into
// file_sd files, and the relabelings work on them unchanged. It understands the ServiceMonitor
// fields the chart uses and refuses the others by name, so a ServiceMonitor it cannot honour
// fails loudly instead of being scraped differently. docs/chart.md says why this is not the
// operator itself.
package scrapeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The object this package reads.
const (
	APIVersion = "monitoring.coreos.com/v1"
	Kind       = "ServiceMonitor"
)

// ServiceMonitor is the part of a monitoring.coreos.com/v1 ServiceMonitor that the generator
// supports; the field names and meanings are prometheus-operator's.
type ServiceMonitor struct {
	Namespace string
	Name      string
	Spec      Spec
}

// Spec is a ServiceMonitor's spec.
type Spec struct {
	// JobLabel names the Service label whose value becomes the job label; empty: the Service's
	// name.
	JobLabel          string            `json:"jobLabel,omitempty"`
	Selector          LabelSelector     `json:"selector"`
	NamespaceSelector NamespaceSelector `json:"namespaceSelector,omitempty"`
	Endpoints         []Endpoint        `json:"endpoints"`
}

// LabelSelector selects the Services; only matchLabels is supported.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// NamespaceSelector lists the namespaces of the Services; empty: the ServiceMonitor's own.
type NamespaceSelector struct {
	MatchNames []string `json:"matchNames,omitempty"`
}

// Endpoint is one scraped port of the selected Services.
type Endpoint struct {
	Port            string     `json:"port"`
	Path            string     `json:"path,omitempty"`
	Scheme          string     `json:"scheme,omitempty"`
	Interval        string     `json:"interval,omitempty"`
	ScrapeTimeout   string     `json:"scrapeTimeout,omitempty"`
	HonorLabels     bool       `json:"honorLabels,omitempty"`
	BearerTokenFile string     `json:"bearerTokenFile,omitempty"`
	TLSConfig       *TLSConfig `json:"tlsConfig,omitempty"`
	// MetricRelabelings rewrite or drop the scraped samples (metric_relabel_configs).
	MetricRelabelings []RelabelConfig `json:"metricRelabelings,omitempty"`
}

// RelabelConfig is prometheus-operator's RelabelConfig. An unset separator, regex or
// replacement keeps Prometheus' default (";", "(.*)", "$1"); an empty replacement is one.
type RelabelConfig struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	// Action is replace (unset), keep, drop, keepequal, dropequal, hashmod, labelmap,
	// labeldrop, labelkeep, lowercase or uppercase, in either case as the operator accepts it.
	Action string `json:"action,omitempty"`
}

// TLSConfig is an endpoint's TLS client configuration.
type TLSConfig struct {
	ServerName         string             `json:"serverName,omitempty"`
	InsecureSkipVerify bool               `json:"insecureSkipVerify,omitempty"`
	CA                 *SecretOrConfigMap `json:"ca,omitempty"`
}

// SecretOrConfigMap names a key of a Secret or a ConfigMap in the ServiceMonitor's namespace.
type SecretOrConfigMap struct {
	Secret    *KeySelector `json:"secret,omitempty"`
	ConfigMap *KeySelector `json:"configMap,omitempty"`
}

// KeySelector is a key of a named object.
type KeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Parse reads a ServiceMonitor from its JSON. A field of the spec that the generator does not
// support is an error that names it.
func Parse(data []byte) (ServiceMonitor, error) {
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return ServiceMonitor{}, fmt.Errorf("parse a ServiceMonitor: %w", err)
	}
	if obj.APIVersion != APIVersion || obj.Kind != Kind {
		return ServiceMonitor{}, fmt.Errorf("parse a ServiceMonitor: got %s %s", obj.APIVersion, obj.Kind)
	}
	sm := ServiceMonitor{Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name}
	if sm.Namespace == "" || sm.Name == "" {
		return ServiceMonitor{}, errors.New("parse a ServiceMonitor: metadata.namespace and metadata.name are required")
	}
	if len(obj.Spec) == 0 {
		return ServiceMonitor{}, fmt.Errorf("ServiceMonitor %s/%s: spec is required", sm.Namespace, sm.Name)
	}
	dec := json.NewDecoder(bytes.NewReader(obj.Spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sm.Spec); err != nil {
		return ServiceMonitor{}, fmt.Errorf("ServiceMonitor %s/%s: spec: %w (the local generator supports only the fields of scrapeconfig.Spec)", sm.Namespace, sm.Name, err)
	}
	return sm, nil
}
