package module

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestExample(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	objs, err := Example(ExampleFile(filepath.Join("..", "..")), ca)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if got := strings.Join(kinds, ","); got != "ClusterVirtualImage,VirtualMachineClass,VirtualDisk,VirtualMachineIPAddress,VirtualMachine" {
		t.Fatalf("kinds %s", got)
	}
	if got, _, _ := unstructured.NestedString(objs[0].Object, "spec", "dataSource", "containerImage", "caBundle"); got != base64.StdEncoding.EncodeToString(ca) {
		t.Errorf("caBundle %q, want DVCR's CA", got)
	}
	if _, err := Manifest(objs); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, doc string
		ca        []byte
		caBundle  string // what the image's caBundle is afterwards; "-" none
		err       string
	}{
		{name: "another registry keeps its own", doc: image("registry.example/disk:1", ""), ca: ca, caBundle: "-"},
		{name: "a caBundle given stays", doc: image(DVCRPullHost+"/local/x:latest", "Zm9v"), ca: ca, caBundle: "Zm9v"},
		{name: "DVCR without its CA", doc: image(DVCRPullHost+"/local/x:latest", ""), err: "is in DVCR, and DVCR's CA is empty"},
		{name: "not a friendly kind", doc: "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: demo}\n", err: `"demo" is not a friendly kind`},
		{name: "empty", doc: "# nothing\n", err: "no objects"},
		{name: "bad YAML", doc: "kind: [\n", err: "document 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "x.yaml")
			if err := os.WriteFile(file, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			objs, err := Example(file, tc.ca)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, set, _ := unstructured.NestedString(objs[0].Object, "spec", "dataSource", "containerImage", "caBundle")
			if !set {
				got = "-"
			}
			if got != tc.caBundle {
				t.Errorf("caBundle %q, want %q", got, tc.caBundle)
			}
		})
	}
}

func image(ref, caBundle string) string {
	doc := "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: ClusterVirtualImage\nmetadata: {name: x}\nspec:\n  dataSource:\n    type: ContainerImage\n    containerImage:\n      image: " + ref + "\n"
	if caBundle != "" {
		doc += "      caBundle: " + caBundle + "\n"
	}
	return doc
}

func TestObserveExample(t *testing.T) {
	obj := func(kind, name, phase, progress string, ready string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "virtualization.deckhouse.io/v1alpha2", "kind": kind, "metadata": map[string]any{"name": name}}}
		status := map[string]any{}
		if phase != "" {
			status["phase"] = phase
		}
		if progress != "" {
			status["progress"] = progress
		}
		if ready != "" {
			status["conditions"] = []any{map[string]any{"type": "Ready", "message": ready}}
		}
		u.Object["status"] = status
		return u
	}
	want := []*unstructured.Unstructured{obj("ClusterVirtualImage", "img", "", "", ""), obj("VirtualDisk", "root", "", "", ""), obj("VirtualMachine", "vm", "", "", "")}
	for _, tc := range []struct {
		name    string
		cluster map[string]*unstructured.Unstructured
		line    string
		failed  string
		vmsRun  bool
	}{
		{name: "nothing yet", cluster: map[string]*unstructured.Unstructured{},
			line: "clustervirtualimage/img not found, virtualdisk/root not found, virtualmachine/vm not found"},
		{name: "importing", cluster: map[string]*unstructured.Unstructured{"img": obj("ClusterVirtualImage", "img", "Provisioning", "42%", ""), "root": obj("VirtualDisk", "root", "Pending", "", ""), "vm": obj("VirtualMachine", "vm", "", "", "")},
			line: "clustervirtualimage/img Provisioning 42%, virtualdisk/root Pending, virtualmachine/vm (no phase yet)"},
		{name: "a failed import", cluster: map[string]*unstructured.Unstructured{"img": obj("ClusterVirtualImage", "img", "Failed", "", "SourceNotFound: 404"), "root": obj("VirtualDisk", "root", "Pending", "", ""), "vm": obj("VirtualMachine", "vm", "Pending", "", "")},
			line: "clustervirtualimage/img Failed, virtualdisk/root Pending, virtualmachine/vm Pending", failed: "clustervirtualimage/img failed: SourceNotFound: 404"},
		{name: "running", cluster: map[string]*unstructured.Unstructured{"img": obj("ClusterVirtualImage", "img", "Ready", "100%", ""), "root": obj("VirtualDisk", "root", "Ready", "100%", ""), "vm": obj("VirtualMachine", "vm", "Running", "", "")},
			line: "clustervirtualimage/img Ready, virtualdisk/root Ready, virtualmachine/vm Running", vmsRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := observeExample(want, func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
				if got, ok := tc.cluster[u.GetName()]; ok {
					return got, nil
				}
				return nil, errors.New("not found")
			})
			if st.line != tc.line || st.failed != tc.failed || st.vmsRun != tc.vmsRun {
				t.Errorf("got %+v\nwant line %q failed %q vmsRun %v", st, tc.line, tc.failed, tc.vmsRun)
			}
		})
	}
}
