package scrapeconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var env = Env{
	TargetsDir: "/p/targets", ServiceAccountTokenFile: "/p/token", FilesDir: "/p/certs", ScrapeInterval: "30s",
}

// The chart's ServiceMonitor for virt-handler, as the cluster serves it.
const handlerSM = `
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: virt-handler, namespace: d8-virtualization, labels: {app.kubernetes.io/component: virt-handler}}
spec:
  namespaceSelector: {matchNames: [d8-virtualization]}
  selector:
    matchLabels:
      kubevirt.internal.virtualization.deckhouse.io: virt-handler
      prometheus.kubevirt.internal.virtualization.deckhouse.io: "true"
  endpoints:
    - port: metrics
      path: /metrics
      scheme: https
      interval: 5s
      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
      tlsConfig:
        serverName: virt-handler-metrics.d8-virtualization.svc
        ca: {secret: {name: kubevirt-ca, key: ca.crt}}
`

func parseYAML(t *testing.T, doc string) ServiceMonitor {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	sm, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

// The job is what prometheus-operator v0.85 generates for the same ServiceMonitor (its
// promcfg.go with role endpointslice and one shard), with the targets from a file.
func TestGenerateAsTheOperator(t *testing.T) {
	cfg, needs, err := Generate([]ServiceMonitor{parseYAML(t, handlerSM)}, env)
	if err != nil {
		t.Fatal(err)
	}
	target := []string{"__meta_kubernetes_endpointslice_address_target_kind", "__meta_kubernetes_endpointslice_address_target_name"}
	want := ScrapeConfig{
		JobName:        "serviceMonitor/d8-virtualization/virt-handler/0",
		FileSDConfigs:  []FileSD{{Files: []string{"/p/targets/endpointslices_d8-virtualization.json"}}},
		ScrapeInterval: "5s", MetricsPath: "/metrics", Scheme: "https",
		TLSConfig:     &TLS{CAFile: "/p/certs/secret_d8-virtualization_kubevirt-ca_ca.crt", ServerName: "virt-handler-metrics.d8-virtualization.svc"},
		Authorization: &Authorization{Type: "Bearer", CredentialsFile: "/p/token"},
		RelabelConfigs: []Relabel{
			{SourceLabels: []string{"job"}, TargetLabel: "__tmp_prometheus_job_name"},
			{Action: "keep", SourceLabels: []string{"__meta_kubernetes_service_label_kubevirt_internal_virtualization_deckhouse_io", "__meta_kubernetes_service_labelpresent_kubevirt_internal_virtualization_deckhouse_io"}, Regex: "(virt-handler);true"},
			{Action: "keep", SourceLabels: []string{"__meta_kubernetes_service_label_prometheus_kubevirt_internal_virtualization_deckhouse_io", "__meta_kubernetes_service_labelpresent_prometheus_kubevirt_internal_virtualization_deckhouse_io"}, Regex: "(true);true"},
			{Action: "keep", SourceLabels: []string{"__meta_kubernetes_endpointslice_port_name"}, Regex: "metrics"},
			{SourceLabels: target, Separator: ";", Regex: "Node;(.*)", Replacement: "${1}", TargetLabel: "node"},
			{SourceLabels: target, Separator: ";", Regex: "Pod;(.*)", Replacement: "${1}", TargetLabel: "pod"},
			{SourceLabels: []string{"__meta_kubernetes_namespace"}, TargetLabel: "namespace"},
			{SourceLabels: []string{"__meta_kubernetes_service_name"}, TargetLabel: "service"},
			{SourceLabels: []string{"__meta_kubernetes_pod_name"}, TargetLabel: "pod"},
			{SourceLabels: []string{"__meta_kubernetes_pod_container_name"}, TargetLabel: "container"},
			{Action: "drop", SourceLabels: []string{"__meta_kubernetes_pod_phase"}, Regex: "(Failed|Succeeded)"},
			{SourceLabels: []string{"__meta_kubernetes_service_name"}, TargetLabel: "job", Replacement: "${1}"},
			{TargetLabel: "endpoint", Replacement: "metrics"},
		},
	}
	if len(cfg.ScrapeConfigs) != 1 || !reflect.DeepEqual(cfg.ScrapeConfigs[0], want) {
		got, _ := json.MarshalIndent(cfg.ScrapeConfigs, "", " ")
		t.Errorf("scrape configs:\n%s", got)
	}
	wantFiles := []File{{Namespace: "d8-virtualization", Kind: "Secret", Name: "kubevirt-ca", Key: "ca.crt", Path: "/p/certs/secret_d8-virtualization_kubevirt-ca_ca.crt"}}
	if !reflect.DeepEqual(needs, Needs{Files: wantFiles, Namespaces: []string{"d8-virtualization"}}) {
		t.Errorf("needs %+v", needs)
	}
	if cfg.Global.ScrapeInterval != "30s" {
		t.Errorf("global %+v", cfg.Global)
	}
	out, err := cfg.YAML()
	if err != nil || !strings.Contains(string(out), "job_name: serviceMonitor/d8-virtualization/virt-handler/0") {
		t.Errorf("YAML: %v\n%s", err, out)
	}
}

func TestGenerateVariants(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		check      func(t *testing.T, cfg Config, needs Needs)
	}{
		{
			name: "own namespace, job label, plain http, a ConfigMap CA shared by two endpoints",
			spec: `{jobLabel: app.kubernetes.io/name, selector: {}, endpoints: [{port: a, tlsConfig: {ca: {configMap: {name: ca, key: b}}}}, {port: b, tlsConfig: {ca: {configMap: {name: ca, key: b}}}}]}`,
			check: func(t *testing.T, cfg Config, needs Needs) {
				sc := cfg.ScrapeConfigs[1]
				if sc.JobName != "serviceMonitor/ns/sm/1" || sc.FileSDConfigs[0].Files[0] != "/p/targets/endpointslices_ns.json" || sc.Authorization != nil {
					t.Errorf("%+v", sc)
				}
				last := sc.RelabelConfigs[len(sc.RelabelConfigs)-2]
				if last.SourceLabels[0] != "__meta_kubernetes_service_label_app_kubernetes_io_name" || last.TargetLabel != "job" || last.Regex != "(.+)" {
					t.Errorf("job label relabeling %+v", last)
				}
				if files := needs.Files; len(files) != 1 || files[0].Kind != "ConfigMap" || files[0].Path != "/p/certs/configmap_ns_ca_b" || needs.Namespaces[0] != "ns" {
					t.Errorf("needs %+v", needs)
				}
			},
		},
		{
			name: "a token file of the host stays as it is; a label value is matched literally",
			spec: `{selector: {matchLabels: {v: "1.2"}}, endpoints: [{port: m, bearerTokenFile: /etc/t}]}`,
			check: func(t *testing.T, cfg Config, _ Needs) {
				sc := cfg.ScrapeConfigs[0]
				if sc.Authorization.CredentialsFile != "/etc/t" || sc.RelabelConfigs[1].Regex != `(1\.2);true` {
					t.Errorf("%+v", sc)
				}
			},
		},
		{
			name: "metricRelabelings: actions lower-cased, an empty replacement kept, unset fields left to Prometheus",
			spec: `{selector: {}, endpoints: [{port: m, metricRelabelings: [` +
				`{sourceLabels: [__name__], regex: "kubevirt_vmi_(.*)", targetLabel: __name__, replacement: "d8_${1}"},` +
				`{sourceLabels: [__name__, drive], separator: ";", regex: "x;.+", targetLabel: drive, replacement: ""},` +
				`{action: LabelDrop, regex: "pod|container"}]}]}`,
			check: func(t *testing.T, cfg Config, _ Needs) {
				out, err := yaml.Marshal(cfg.ScrapeConfigs[0].MetricRelabelConfigs)
				if err != nil {
					t.Fatal(err)
				}
				want := `- action: replace
  regex: kubevirt_vmi_(.*)
  replacement: d8_${1}
  source_labels:
  - __name__
  target_label: __name__
- action: replace
  regex: x;.+
  replacement: ""
  separator: ;
  source_labels:
  - __name__
  - drive
  target_label: drive
- action: labeldrop
  regex: pod|container
`
				if string(out) != want {
					t.Errorf("metric_relabel_configs:\n%s\nwant\n%s", out, want)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := parseYAML(t, "{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: sm, namespace: ns}, spec: "+tc.spec+"}")
			cfg, needs, err := Generate([]ServiceMonitor{sm}, env)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg, needs)
		})
	}
}

// Jobs come in namespace and name order, whatever order the cluster listed them in.
func TestGenerateIsStable(t *testing.T) {
	mk := func(ns, name string) ServiceMonitor {
		return ServiceMonitor{Namespace: ns, Name: name, Spec: Spec{Endpoints: []Endpoint{{Port: "m"}}}}
	}
	cfg, _, err := Generate([]ServiceMonitor{mk("b", "a"), mk("a", "z"), mk("a", "b")}, env)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	if want := []string{"serviceMonitor/a/b/0", "serviceMonitor/a/z/0", "serviceMonitor/b/a/0"}; !reflect.DeepEqual(jobs, want) {
		t.Errorf("jobs %v, want %v", jobs, want)
	}
}

func TestRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"another kind", `{apiVersion: v1, kind: Service, metadata: {name: a, namespace: b}, spec: {}}`, "got v1 Service"},
		{"no namespace", `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: a}, spec: {}}`, "metadata.namespace"},
		{"no spec", `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: a, namespace: b}}`, "spec is required"},
		{"relabelings", `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: a, namespace: b}, spec: {selector: {}, endpoints: [{port: m, relabelings: []}]}}`, `unknown field "relabelings"`},
		{"targetPort", `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: a, namespace: b}, spec: {selector: {}, endpoints: [{targetPort: 8080}]}}`, `unknown field "targetPort"`},
		{"matchExpressions", `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: a, namespace: b}, spec: {selector: {matchExpressions: []}, endpoints: []}}`, `unknown field "matchExpressions"`},
		{"any namespace", `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: a, namespace: b}, spec: {selector: {}, namespaceSelector: {any: true}, endpoints: []}}`, `unknown field "any"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := yaml.YAMLToJSON([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		ep   Endpoint
		want string
	}{
		{"no port", Endpoint{}, "spec.endpoints[0]: port: required"},
		{"scheme", Endpoint{Port: "m", Scheme: "ftp"}, `scheme: "ftp"`},
		{"interval", Endpoint{Port: "m", Interval: "soon"}, "interval:"},
		{"timeout", Endpoint{Port: "m", ScrapeTimeout: "1 s"}, "scrapeTimeout:"},
		{"CA without a key", Endpoint{Port: "m", TLSConfig: &TLSConfig{CA: &SecretOrConfigMap{Secret: &KeySelector{Name: "s"}}}}, "tlsConfig.ca:"},
		{"relabel action", Endpoint{Port: "m", MetricRelabelings: []RelabelConfig{{Action: "rename"}}}, `metricRelabelings[0]: action: "rename"`},
		{"relabel regex", Endpoint{Port: "m", MetricRelabelings: []RelabelConfig{{Action: "drop", Regex: "(["}}}, "metricRelabelings[0]: regex:"},
		{"relabel target", Endpoint{Port: "m", MetricRelabelings: []RelabelConfig{{Regex: "a", TargetLabel: "no-dash"}}}, `metricRelabelings[0]: targetLabel: "no-dash"`},
		{"relabel source", Endpoint{Port: "m", MetricRelabelings: []RelabelConfig{{Action: "keep", SourceLabels: []string{"a b"}}}}, `sourceLabels: "a b"`},
		{"hashmod modulus", Endpoint{Port: "m", MetricRelabelings: []RelabelConfig{{Action: "hashmod", TargetLabel: "t"}}}, "modulus:"},
		{"CA twice", Endpoint{Port: "m", TLSConfig: &TLSConfig{CA: &SecretOrConfigMap{Secret: &KeySelector{Name: "s", Key: "k"}, ConfigMap: &KeySelector{Name: "s", Key: "k"}}}}, "both secret and configMap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := ServiceMonitor{Namespace: "ns", Name: "sm", Spec: Spec{Endpoints: []Endpoint{tc.ep}}}
			if _, _, err := Generate([]ServiceMonitor{sm}, env); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ServiceMonitor ns/sm") {
				t.Errorf("error %v, want one naming ServiceMonitor ns/sm and %q", err, tc.want)
			}
		})
	}
}

// Whatever a ServiceMonitor holds, Parse and Generate answer an error or a configuration that
// marshals, and never panic.
func FuzzParseGenerate(f *testing.F) {
	seed, _ := yaml.YAMLToJSON([]byte(handlerSM))
	f.Add(seed)
	f.Add([]byte(`{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"a","namespace":"b"},"spec":{"selector":{},"endpoints":[{"port":"p","metricRelabelings":[{"sourceLabels":["__name__","drive"],"regex":"k_.*;(vd)-(.+)","targetLabel":"block_device_name","replacement":"$2"},{"action":"Drop","regex":"x"}]}]}}`))
	f.Add([]byte(`{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"a","namespace":"b"},"spec":{"jobLabel":"x.y/z","selector":{"matchLabels":{"a.b/c":"(d)"}},"endpoints":[{"port":"p","tlsConfig":{"ca":{"configMap":{"name":"c","key":"k"}}}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sm, err := Parse(data)
		if err != nil {
			return
		}
		cfg, _, err := Generate([]ServiceMonitor{sm}, env)
		if err != nil {
			return
		}
		if len(cfg.ScrapeConfigs) != len(sm.Spec.Endpoints) {
			t.Fatalf("%d jobs for %d endpoints", len(cfg.ScrapeConfigs), len(sm.Spec.Endpoints))
		}
		if _, err := cfg.YAML(); err != nil {
			t.Fatal(err)
		}
	})
}
