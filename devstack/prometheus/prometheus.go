// Package prometheus runs Debian's Prometheus on a local stack as a host process (a stack
// component with its own data directory, stopped with the stack) and asks its HTTP API for
// targets and queries. Its configuration comes from the cluster's ServiceMonitors
// (subpackage scrapeconfig), as prometheus-operator would write it.
package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"

	"github.com/d8virt/devstack/controlplane"
)

// OperatorModule is the prometheus-operator release whose CRDs (ServiceMonitor, PrometheusRule)
// the stack installs, fetched as a Go module: the module proxy serves the repository's files.
const OperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// OperatorCRDFiles are the ServiceMonitor and PrometheusRule CRDs in OperatorModule's directory.
func OperatorCRDFiles(moduleDir string) []string {
	dir := filepath.Join(moduleDir, "example", "prometheus-operator-crd")
	return []string{
		filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(dir, "monitoring.coreos.com_prometheusrules.yaml"),
	}
}

// Server is a Prometheus of a stack: its directory holds the configuration, the files it
// names and the TSDB.
type Server struct {
	bin  string
	dir  string
	addr string
}

// New finds the prometheus binary (Debian's package, hack/install-deps.sh) for a server that
// keeps its state in dir and listens on addr (host:port).
func New(dir, addr string) (Server, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return Server{}, fmt.Errorf("prometheus (Debian package prometheus, hack/install-deps.sh): %w", err)
	}
	return Server{bin: bin, dir: dir, addr: addr}, nil
}

// Dir is the server's directory.
func (s Server) Dir() string { return s.dir }

// ConfigFile is where the configuration must be before the server starts.
func (s Server) ConfigFile() string { return filepath.Join(s.dir, "prometheus.yml") }

// URL is the server's HTTP address.
func (s Server) URL() string { return "http://" + s.addr }

// Component runs the server as a stack component: Up starts it and waits until it is ready,
// Down (or StopComponent) stops it.
func (s Server) Component() controlplane.Component {
	return controlplane.Component{
		Name: "prometheus",
		Bin:  s.bin,
		Args: []string{
			"--config.file=" + s.ConfigFile(),
			"--storage.tsdb.path=" + filepath.Join(s.dir, "data"),
			"--storage.tsdb.retention.time=1h",
			"--web.listen-address=" + s.addr,
		},
		Ready: controlplane.HTTPReady(s.URL() + "/-/ready"),
	}
}

// SDDaemon is the program (devstack/cmd/prometheus-sd) and the stack daemon that keeps the
// server's targets current (scrapeconfig.Follow).
const SDDaemon = "prometheus-sd"

// TargetsDir holds the discovered targets, a file_sd file per namespace.
func (s Server) TargetsDir() string { return filepath.Join(s.dir, "targets") }

// SDKubeconfig is the kubeconfig SDDaemon watches the cluster with: Prometheus' account, its
// token read from a file.
func (s Server) SDKubeconfig() string { return filepath.Join(s.dir, "sd.kubeconfig") }

// NamespacesFile lists the namespaces whose targets the configuration reads, one per line.
func (s Server) NamespacesFile() string { return filepath.Join(s.dir, "namespaces") }

// SDComponent runs bin (SDDaemon) as a stack component that follows the targets of the
// namespaces in NamespacesFile into TargetsDir.
func (s Server) SDComponent(bin string) controlplane.Component {
	return controlplane.Component{
		Name: SDDaemon,
		Bin:  bin,
		Args: []string{"--kubeconfig", s.SDKubeconfig(), "--targets-dir", s.TargetsDir(), "--namespaces-file", s.NamespacesFile()},
	}
}

// Client asks a Prometheus' HTTP API.
type Client struct {
	URL  string
	HTTP *http.Client
}

// Target is an active scrape target.
type Target struct {
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
	Labels     map[string]string `json:"labels"`
}

// Sample is one series of an instant vector.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Targets are the active targets (/api/v1/targets).
func (c Client) Targets(ctx context.Context) ([]Target, error) {
	var data struct {
		ActiveTargets []Target `json:"activeTargets"`
	}
	if err := c.get(ctx, "/api/v1/targets?state=active", &data); err != nil {
		return nil, err
	}
	return data.ActiveTargets, nil
}

// Query evaluates an instant query that returns a vector.
func (c Client) Query(ctx context.Context, q string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := c.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, not a vector", q, data.ResultType)
	}
	var out []Sample
	if err := json.Unmarshal(data.Result, &out); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	return out, nil
}

func (c Client) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var out struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("prometheus %s: %s: %w", path, resp.Status, err)
	}
	if out.Status != "success" {
		return fmt.Errorf("prometheus %s: %s: %s", path, resp.Status, out.Error)
	}
	if err := json.Unmarshal(out.Data, into); err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	return nil
}
