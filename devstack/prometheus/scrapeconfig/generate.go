package scrapeconfig

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// PodTokenFile is where a pod's ServiceAccount token is: a ServiceMonitor's bearerTokenFile
// there means Prometheus' own account's token.
const PodTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// Env is what the generated configuration needs of the Prometheus that runs it.
type Env struct {
	// TargetsDir holds the discovered targets, a file per namespace (TargetsFile).
	TargetsDir string
	// ServiceAccountTokenFile is the file that stands for PodTokenFile: the token of the
	// account Prometheus scrapes as.
	ServiceAccountTokenFile string
	// FilesDir is where the CA files that tlsConfigs name are written (see File).
	FilesDir string
	// ScrapeInterval is the global default scrape interval.
	ScrapeInterval string
}

// Config is a Prometheus configuration file, as much of it as the generator writes.
type Config struct {
	Global        Global         `json:"global"`
	ScrapeConfigs []ScrapeConfig `json:"scrape_configs"`
}

// Global is the global block.
type Global struct {
	ScrapeInterval string `json:"scrape_interval,omitempty"`
}

// ScrapeConfig is one job.
type ScrapeConfig struct {
	JobName        string         `json:"job_name"`
	HonorLabels    bool           `json:"honor_labels"`
	FileSDConfigs  []FileSD       `json:"file_sd_configs"`
	ScrapeInterval string         `json:"scrape_interval,omitempty"`
	ScrapeTimeout  string         `json:"scrape_timeout,omitempty"`
	MetricsPath    string         `json:"metrics_path,omitempty"`
	Scheme         string         `json:"scheme,omitempty"`
	TLSConfig      *TLS           `json:"tls_config,omitempty"`
	Authorization  *Authorization `json:"authorization,omitempty"`
	RelabelConfigs []Relabel      `json:"relabel_configs"`
	// MetricRelabelConfigs are the endpoint's metricRelabelings.
	MetricRelabelConfigs []MetricRelabel `json:"metric_relabel_configs,omitempty"`
}

// FileSD is a file_sd_configs entry: the files Discover writes, one per namespace, stand in for
// kubernetes_sd_configs with role endpointslice restricted to those namespaces (Debian builds
// Prometheus without the Kubernetes service discovery).
type FileSD struct {
	Files []string `json:"files"`
}

// TargetsFile is where Discover writes the targets of a namespace.
func TargetsFile(dir, namespace string) string {
	return filepath.Join(dir, "endpointslices_"+namespace+".json")
}

// TLS is a tls_config.
type TLS struct {
	CAFile             string `json:"ca_file,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Authorization is a bearer token read from a file.
type Authorization struct {
	Type            string `json:"type"`
	CredentialsFile string `json:"credentials_file"`
}

// Relabel is a relabel_configs entry.
type Relabel struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    string   `json:"separator,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  string   `json:"replacement,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// MetricRelabel is a metric_relabel_configs entry: unlike the generated relabelings, a
// replacement may be set to the empty string.
type MetricRelabel struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// File is a key of a Secret or ConfigMap that the configuration reads from Path.
type File struct {
	Namespace, Kind, Name, Key string
	Path                       string
}

// Needs is what the configuration reads besides itself: the CA files and the targets of the
// namespaces (TargetsFile).
type Needs struct {
	Files      []File
	Namespaces []string
}

// YAML is the configuration file's content.
func (c Config) YAML() ([]byte, error) { return yaml.Marshal(c) }

// Generate is the configuration for the ServiceMonitors: one job per endpoint, named
// serviceMonitor/<namespace>/<name>/<index> as the operator names it, in a stable order. The
// second result says what the configuration reads.
func Generate(sms []ServiceMonitor, env Env) (Config, Needs, error) {
	sms = slices.Clone(sms)
	slices.SortFunc(sms, func(a, b ServiceMonitor) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	cfg := Config{Global: Global{ScrapeInterval: env.ScrapeInterval}, ScrapeConfigs: []ScrapeConfig{}}
	var needs Needs
	for _, sm := range sms {
		for _, ns := range namespaces(sm) {
			if !slices.Contains(needs.Namespaces, ns) {
				needs.Namespaces = append(needs.Namespaces, ns)
			}
		}
		for i, ep := range sm.Spec.Endpoints {
			sc, f, err := scrapeConfig(sm, i, ep, env)
			if err != nil {
				return Config{}, Needs{}, fmt.Errorf("ServiceMonitor %s/%s: spec.endpoints[%d]: %w", sm.Namespace, sm.Name, i, err)
			}
			cfg.ScrapeConfigs = append(cfg.ScrapeConfigs, sc)
			if f != nil && !slices.Contains(needs.Files, *f) {
				needs.Files = append(needs.Files, *f)
			}
		}
	}
	slices.Sort(needs.Namespaces)
	return cfg, needs, nil
}

// namespaces are those of a ServiceMonitor's Services: its selector's, or its own.
func namespaces(sm ServiceMonitor) []string {
	if ns := sm.Spec.NamespaceSelector.MatchNames; len(ns) > 0 {
		return ns
	}
	return []string{sm.Namespace}
}

func scrapeConfig(sm ServiceMonitor, i int, ep Endpoint, env Env) (ScrapeConfig, *File, error) {
	if ep.Port == "" {
		return ScrapeConfig{}, nil, fmt.Errorf("port: required (the generator selects ports by name)")
	}
	if ep.Scheme != "" && ep.Scheme != "http" && ep.Scheme != "https" {
		return ScrapeConfig{}, nil, fmt.Errorf("scheme: %q is neither http nor https", ep.Scheme)
	}
	for name, d := range map[string]string{"interval": ep.Interval, "scrapeTimeout": ep.ScrapeTimeout} {
		if _, err := model.ParseDuration(d); d != "" && err != nil {
			return ScrapeConfig{}, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	var files []string
	for _, ns := range namespaces(sm) {
		files = append(files, TargetsFile(env.TargetsDir, ns))
	}
	sc := ScrapeConfig{
		JobName:        fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.Namespace, sm.Name, i),
		HonorLabels:    ep.HonorLabels,
		FileSDConfigs:  []FileSD{{Files: files}},
		ScrapeInterval: ep.Interval,
		ScrapeTimeout:  ep.ScrapeTimeout,
		MetricsPath:    ep.Path,
		Scheme:         ep.Scheme,
		RelabelConfigs: relabelings(sm.Spec, ep.Port),
	}
	for j, r := range ep.MetricRelabelings {
		mr, err := metricRelabel(r)
		if err != nil {
			return ScrapeConfig{}, nil, fmt.Errorf("metricRelabelings[%d]: %w", j, err)
		}
		sc.MetricRelabelConfigs = append(sc.MetricRelabelConfigs, mr)
	}
	if ep.BearerTokenFile != "" {
		token := ep.BearerTokenFile
		if token == PodTokenFile {
			token = env.ServiceAccountTokenFile
		}
		sc.Authorization = &Authorization{Type: "Bearer", CredentialsFile: token}
	}
	var file *File
	if t := ep.TLSConfig; t != nil {
		sc.TLSConfig = &TLS{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
		if t.CA != nil {
			f, err := caFile(sm.Namespace, *t.CA, env.FilesDir)
			if err != nil {
				return ScrapeConfig{}, nil, fmt.Errorf("tlsConfig.ca: %w", err)
			}
			sc.TLSConfig.CAFile = f.Path
			file = &f
		}
	}
	return sc, file, nil
}

// caFile is where the CA of a key reference goes, named as the operator names its copies.
func caFile(ns string, ref SecretOrConfigMap, dir string) (File, error) {
	kind, sel := "Secret", ref.Secret
	if ref.ConfigMap != nil {
		if ref.Secret != nil {
			return File{}, fmt.Errorf("both secret and configMap are set")
		}
		kind, sel = "ConfigMap", ref.ConfigMap
	}
	if sel == nil || sel.Name == "" || sel.Key == "" {
		return File{}, fmt.Errorf("a secret or configMap with name and key is required")
	}
	prefix := map[string]string{"Secret": "secret", "ConfigMap": "configmap"}[kind]
	return File{Namespace: ns, Kind: kind, Name: sel.Name, Key: sel.Key,
		Path: filepath.Join(dir, fmt.Sprintf("%s_%s_%s_%s", prefix, ns, sel.Name, sel.Key))}, nil
}

// labelName is what Prometheus accepts as a target label, its own expression: a label name
// that may hold ${1} or $1 of the regex's groups.
var labelName = regexp.MustCompile(`^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$`)

// metricRelabel checks a metricRelabelings entry as Prometheus would load it and writes it in
// Prometheus' terms, the action lower-cased as the operator writes it.
func metricRelabel(r RelabelConfig) (MetricRelabel, error) {
	action := strings.ToLower(r.Action)
	if action == "" {
		action = "replace"
	}
	if r.Regex != "" {
		if _, err := regexp.Compile("^(?s:" + r.Regex + ")$"); err != nil {
			return MetricRelabel{}, fmt.Errorf("regex: %w", err)
		}
	}
	for _, l := range r.SourceLabels {
		if !model.LegacyValidation.IsValidLabelName(l) {
			return MetricRelabel{}, fmt.Errorf("sourceLabels: %q is not a label name", l)
		}
	}
	switch action {
	case "replace", "hashmod", "lowercase", "uppercase", "keepequal", "dropequal":
		if r.TargetLabel == "" || !labelName.MatchString(r.TargetLabel) {
			return MetricRelabel{}, fmt.Errorf("targetLabel: %q is not a label name, which action %s needs", r.TargetLabel, action)
		}
		if action == "hashmod" && r.Modulus == 0 {
			return MetricRelabel{}, fmt.Errorf("modulus: action hashmod needs one")
		}
	case "keep", "drop", "labelmap", "labeldrop", "labelkeep":
	default:
		return MetricRelabel{}, fmt.Errorf("action: %q is not a Prometheus relabel action", r.Action)
	}
	return MetricRelabel{SourceLabels: r.SourceLabels, Separator: r.Separator, Regex: r.Regex, Modulus: r.Modulus,
		Replacement: r.Replacement, TargetLabel: r.TargetLabel, Action: action}, nil
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// sanitize turns a Kubernetes label key into the suffix of its discovery meta label.
func sanitize(key string) string { return invalidLabelChars.ReplaceAllString(key, "_") }

// relabelings are the operator's for a ServiceMonitor endpoint selected by port name, with its
// service discovery role EndpointSlice: keep the
// selected Services and the port, set node or pod from the endpoint's target, then namespace,
// service, pod, container, job and endpoint; drop finished pods.
func relabelings(spec Spec, port string) []Relabel {
	rs := []Relabel{{SourceLabels: []string{"job"}, TargetLabel: "__tmp_prometheus_job_name"}}
	keys := make([]string, 0, len(spec.Selector.MatchLabels))
	for k := range spec.Selector.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := sanitize(k)
		rs = append(rs, Relabel{
			Action:       "keep",
			SourceLabels: []string{"__meta_kubernetes_service_label_" + s, "__meta_kubernetes_service_labelpresent_" + s},
			Regex:        "(" + regexp.QuoteMeta(spec.Selector.MatchLabels[k]) + ");true",
		})
	}
	target := []string{"__meta_kubernetes_endpointslice_address_target_kind", "__meta_kubernetes_endpointslice_address_target_name"}
	rs = append(rs,
		Relabel{Action: "keep", SourceLabels: []string{"__meta_kubernetes_endpointslice_port_name"}, Regex: regexp.QuoteMeta(port)},
		Relabel{SourceLabels: target, Separator: ";", Regex: "Node;(.*)", Replacement: "${1}", TargetLabel: "node"},
		Relabel{SourceLabels: target, Separator: ";", Regex: "Pod;(.*)", Replacement: "${1}", TargetLabel: "pod"},
		Relabel{SourceLabels: []string{"__meta_kubernetes_namespace"}, TargetLabel: "namespace"},
		Relabel{SourceLabels: []string{"__meta_kubernetes_service_name"}, TargetLabel: "service"},
		Relabel{SourceLabels: []string{"__meta_kubernetes_pod_name"}, TargetLabel: "pod"},
		Relabel{SourceLabels: []string{"__meta_kubernetes_pod_container_name"}, TargetLabel: "container"},
		Relabel{Action: "drop", SourceLabels: []string{"__meta_kubernetes_pod_phase"}, Regex: "(Failed|Succeeded)"},
		Relabel{SourceLabels: []string{"__meta_kubernetes_service_name"}, TargetLabel: "job", Replacement: "${1}"},
	)
	if spec.JobLabel != "" {
		rs = append(rs, Relabel{SourceLabels: []string{"__meta_kubernetes_service_label_" + sanitize(spec.JobLabel)},
			TargetLabel: "job", Regex: "(.+)", Replacement: "${1}"})
	}
	return append(rs, Relabel{TargetLabel: "endpoint", Replacement: port})
}
