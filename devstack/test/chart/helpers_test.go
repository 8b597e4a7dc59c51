package chart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/test/chart/chartsrc"
)

// release and namespace of the renders that do not run against the cluster.
const (
	release   = "virtualization"
	namespace = "d8-virtualization"
)

// monitoringAPIs makes helm render as if prometheus-operator's CRDs were served.
var monitoringAPIs = []string{
	"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
	"--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
}

// repoRoot is the repository's root: the test runs in devstack/test/chart.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

func chartDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), chartsrc.ChartDir)
}

func testdata(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// helm runs the stack's helm and returns its combined output and error.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(controlplane.BinDir(), "helm"), args...)
	// No user configuration or caches leak in.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// rendered are the package's renders by their arguments (a *once each). A render costs about a
// second of CPU (the templates generate certificates and a bcrypt hash), the tests only read the
// manifests, and several ask for the same one.
var rendered sync.Map

type once struct {
	sync.Once
	out string
	err error
}

// render is helm template of the chart with the given extra arguments, once per package; it
// fails the test when helm does.
func render(t testing.TB, args ...string) string {
	t.Helper()
	all := append([]string{"template", release, chartDir(t), "--namespace", namespace}, args...)
	v, _ := rendered.LoadOrStore(strings.Join(all, "\x00"), &once{})
	r := v.(*once)
	r.Do(func() { r.out, r.err = helm(t, all...) })
	if r.err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(all, " "), r.err, r.out)
	}
	return r.out
}

// decode splits a rendered manifest into objects.
func decode(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode rendered manifest: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// find returns the object of the kind and name, failing the test when there is none.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendered chart", kind, name)
	return nil
}

// into converts an unstructured object into a typed one.
func into[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return out
}

// renders are the chart rendered with default values and with the non-default values file, both
// with the monitoring APIs, so that every template shows.
func renders(t testing.TB) map[string][]*unstructured.Unstructured {
	t.Helper()
	return map[string][]*unstructured.Unstructured{
		"default": decode(t, render(t, monitoringAPIs...)),
		"custom":  decode(t, render(t, append([]string{"-f", testdata(t, "values-custom.yaml")}, monitoringAPIs...)...)),
	}
}
