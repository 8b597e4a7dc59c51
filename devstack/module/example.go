package module

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ExampleFile is the example `make run` creates: friendly objects only (examples/vm.yaml).
func ExampleFile(repo string) string { return filepath.Join(repo, "examples", "vm.yaml") }

// The friendly kinds of an example and the resources the cluster serves them as; an example
// holds nothing else.
var exampleResources = map[string]string{
	"ClusterVirtualImage":     "clustervirtualimages",
	"VirtualImage":            "virtualimages",
	"VirtualDisk":             "virtualdisks",
	"VirtualMachineClass":     "virtualmachineclasses",
	"VirtualMachineIPAddress": "virtualmachineipaddresses",
	"VirtualMachine":          "virtualmachines",
}

// Example is the example of file as the cluster gets it: every ClusterVirtualImage or
// VirtualImage whose containerImage is in DVCR (DVCRPullHost) and names no caBundle gets
// dvcrCA, the one thing only the installed module knows. It returns the objects in the file's
// order; Manifest makes them one document for kubectl apply.
func Example(file string, dvcrCA []byte) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("example: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("example %s: document %d: %w", file, i, err)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if _, ok := exampleResources[u.GetKind()]; !ok || u.GroupVersionKind().Group != "virtualization.deckhouse.io" {
			return nil, fmt.Errorf("example %s: document %d: %s %q is not a friendly kind", file, i, u.GetObjectKind().GroupVersionKind(), u.GetName())
		}
		if err := fillDVCRCA(u, dvcrCA); err != nil {
			return nil, fmt.Errorf("example %s: %s %s: %w", file, u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("example %s: no objects", file)
	}
	return objs, nil
}

func fillDVCRCA(u *unstructured.Unstructured, ca []byte) error {
	if u.GetKind() != "ClusterVirtualImage" && u.GetKind() != "VirtualImage" {
		return nil
	}
	image, _, _ := unstructured.NestedString(u.Object, "spec", "dataSource", "containerImage", "image")
	if !strings.HasPrefix(image, DVCRPullHost+"/") {
		return nil
	}
	if _, set, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "dataSource", "containerImage", "caBundle"); set {
		return nil
	}
	if len(ca) == 0 {
		return fmt.Errorf("spec.dataSource.containerImage.image %s is in DVCR, and DVCR's CA is empty", image)
	}
	return unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(ca), "spec", "dataSource", "containerImage", "caBundle")
}

// Manifest is objs as one v1 List, which kubectl apply -f - takes.
func Manifest(objs []*unstructured.Unstructured) ([]byte, error) {
	items := make([]any, len(objs))
	for i, o := range objs {
		items[i] = o.Object
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// DVCRCA is the CA of the installed module's DVCR (the Secret dvcr-tls).
func DVCRCA(ctx context.Context, o Options) ([]byte, error) {
	kube, _, err := clients(o.Stack)
	if err != nil {
		return nil, err
	}
	sec, err := kube.CoreV1().Secrets(Namespace).Get(ctx, dvcrTLSSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("DVCR's CA (is the module installed? devcluster module up): %w", err)
	}
	return sec.Data["ca.crt"], nil
}

// ApplyExample applies the example objs as the stack's admin (kubectl apply, server side), so
// that running it again changes nothing.
func ApplyExample(ctx context.Context, o Options, objs []*unstructured.Unstructured) error {
	manifest, err := Manifest(objs)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "d8v-example-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(manifest); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	out, err := o.Tool(ctx, "kubectl", "apply", "--server-side", "--field-manager=devcluster-example", "-f", f.Name())
	if err != nil {
		return fmt.Errorf("kubectl apply the example: %w\n%s", err, out)
	}
	o.logf("%s", strings.TrimSpace(out))
	return nil
}

// exampleState is one look at the example's objects: each one's kind/name with its phase (and
// progress), and the first that failed.
type exampleState struct {
	line   string
	failed string
	vmsRun bool
}

// observeExample reads objs' phases: the VMs run (their friendly phase) or an image or disk
// failed (its Ready condition's message).
func observeExample(objs []*unstructured.Unstructured, get func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) exampleState {
	st := exampleState{vmsRun: true}
	var parts []string
	for _, o := range objs {
		ref := strings.ToLower(o.GetKind()) + "/" + o.GetName()
		cur, err := get(o)
		if err != nil {
			parts = append(parts, ref+" "+err.Error())
			if o.GetKind() == "VirtualMachine" {
				st.vmsRun = false
			}
			continue
		}
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
		if progress, _, _ := unstructured.NestedString(cur.Object, "status", "progress"); progress != "" && phase != "Ready" {
			phase += " " + progress
		}
		if phase == "" {
			phase = "(no phase yet)"
		}
		parts = append(parts, ref+" "+phase)
		switch {
		case o.GetKind() == "VirtualMachine" && phase != "Running":
			st.vmsRun = false
		case strings.HasPrefix(phase, "Failed") && st.failed == "":
			st.failed = ref + " failed: " + readyMessage(cur)
		}
	}
	sort.Strings(parts)
	st.line = strings.Join(parts, ", ")
	return st
}

func readyMessage(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return fmt.Sprint(m["message"])
		}
	}
	return "no Ready condition"
}

// WaitExample waits until every VirtualMachine of the example runs, logging each change of the
// objects' phases (an import's progress too); an image or disk that fails ends the wait with its
// reason. Then each VM's internal VM must run as WaitVM sees it (a restarted stack's status is not
// trusted).
func WaitExample(ctx context.Context, o Options, objs []*unstructured.Unstructured, timeout time.Duration) error {
	_, dyn, err := clients(o.Stack)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	get := func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		gvr := schema.GroupVersionResource{Group: u.GroupVersionKind().Group, Version: u.GroupVersionKind().Version, Resource: exampleResources[u.GetKind()]}
		return dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(wctx, u.GetName(), metav1.GetOptions{})
	}
	start, last := time.Now(), ""
	for {
		st := observeExample(objs, get)
		if st.line != last {
			o.logf("%s", st.line)
			last = st.line
		}
		if st.failed != "" {
			return errors.New(st.failed)
		}
		if st.vmsRun {
			break
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for the example: %w", ctx.Err())
			}
			return fmt.Errorf("the example does not run after %s: %s", timeout, last)
		case <-time.After(time.Second):
		}
	}
	for _, u := range objs {
		if u.GetKind() != "VirtualMachine" {
			continue
		}
		if err := WaitVM(ctx, o, u.GetNamespace(), u.GetName(), timeout-time.Since(start)); err != nil {
			return err
		}
	}
	return nil
}
