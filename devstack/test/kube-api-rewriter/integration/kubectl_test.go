package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/testenv"
)

// kubectl runs kubectl through the sidecar and fails the test on error.
func kubectl(t *testing.T, fx *fixture, args ...string) string {
	t.Helper()
	return testenv.Kubectl(t, fx.modes[0].kubeconfig, args...)
}

// kubectlIn is kubectl with stdin, for the commands that are expected to fail.
func kubectlIn(t *testing.T, fx *fixture, stdin string, args ...string) (string, error) {
	t.Helper()
	return testenv.KubectlInput(t, fx.modes[0].kubeconfig, stdin, args...)
}

// objectJSON reads an object through the sidecar as kubectl prints it.
func objectJSON(t *testing.T, fx *fixture, args ...string) map[string]any {
	t.Helper()
	var o map[string]any
	out := kubectl(t, fx, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("kubectl %v -o json: %v\n%s", args, err, out)
	}
	return o
}

func labelsOf(o map[string]any) map[string]any {
	md, _ := o["metadata"].(map[string]any)
	l, _ := md["labels"].(map[string]any)
	return l
}

const kubectlVM = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %s
  namespace: %s
  labels:
    kubevirt.io/created-by: kubectl
    app: demo
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        kubevirt.io/domain: %s
    spec:
      domain:
        devices: {}
`

// TestKubectlVerbs drives the rewriter with kubectl as a user would: apply on the client and
// the server side, get, label, annotate, patch of every type, edit with KUBE_EDITOR, describe
// and events, wait and delete. kubectl sees KubeVirt's names; the cluster stores the renamed ones.
func TestKubectlVerbs(t *testing.T) {
	fx := setup(t)
	ns := fx.env.Namespace(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	storedLabels := func(name string) map[string]string { return stored(t, fx, ns, name).GetLabels() }

	// apply, client side
	kubectl(t, fx, "apply", "-f", write("a.yaml", fmt.Sprintf(kubectlVM, "a", ns, "a")))
	if l := storedLabels("a"); l[renamedLabelPrefix+"/created-by"] != "kubectl" || l["kubevirt.io/created-by"] != "" {
		t.Errorf("client-side apply stored labels %v", l)
	}
	if l := labelsOf(objectJSON(t, fx, "get", "vm", "a", "-n", ns)); l["kubevirt.io/created-by"] != "kubectl" {
		t.Errorf("kubectl get shows labels %v", l)
	}
	// A second apply computes its patch from the last-applied annotation, in kubectl's names.
	kubectl(t, fx, "apply", "-f", write("a2.yaml", strings.Replace(fmt.Sprintf(kubectlVM, "a", ns, "a"), "app: demo", "app: demo2", 1)))
	if l := storedLabels("a"); l["app"] != "demo2" || l[renamedLabelPrefix+"/created-by"] != "kubectl" {
		t.Errorf("second client-side apply stored labels %v", l)
	}

	// apply, server side: the managed fields name kubectl's keys through the rewriter and the
	// cluster's keys in the cluster (defect 4).
	kubectl(t, fx, "apply", "--server-side", "--field-manager", "first", "-f", write("s.yaml", fmt.Sprintf(kubectlVM, "s", ns, "s")))
	vm := objectJSON(t, fx, "get", "vm", "s", "-n", ns, "--show-managed-fields")
	mf, _ := json.Marshal(vm["metadata"].(map[string]any)["managedFields"])
	if !strings.Contains(string(mf), `"f:kubevirt.io/created-by"`) || strings.Contains(string(mf), "internal.virtualization") {
		t.Errorf("managed fields through the rewriter: %s", mf)
	}
	direct, _ := json.Marshal(stored(t, fx, ns, "s").GetManagedFields())
	if !strings.Contains(string(direct), `"f:`+renamedLabelPrefix+`/created-by"`) {
		t.Errorf("managed fields in the cluster: %s", direct)
	}
	// A conflict names kubectl's key in every part of the Status (defect 6).
	out, err := kubectlIn(t, fx, "", "apply", "--server-side", "--field-manager", "second", "-f",
		write("s2.yaml", strings.Replace(fmt.Sprintf(kubectlVM, "s", ns, "s"), "created-by: kubectl", "created-by: other", 1)))
	if err == nil || !strings.Contains(out, ".metadata.labels.kubevirt.io/created-by") || strings.Contains(out, "internal.virtualization") {
		t.Errorf("conflicting server-side apply: %v\n%s", err, out)
	}

	// label, annotate
	kubectl(t, fx, "label", "vm", "a", "-n", ns, "kubevirt.io/extra=1", "vm.kubevirt.io/name=a")
	kubectl(t, fx, "annotate", "vm", "a", "-n", ns, "kubevirt.io/note=hello")
	u := stored(t, fx, ns, "a")
	if l := u.GetLabels(); l[renamedLabelPrefix+"/extra"] != "1" || l["vm."+renamedLabelPrefix+"/name"] != "a" {
		t.Errorf("kubectl label stored %v", l)
	}
	if a := u.GetAnnotations(); a[renamedLabelPrefix+"/note"] != "hello" {
		t.Errorf("kubectl annotate stored %v", a)
	}
	kubectl(t, fx, "label", "vm", "a", "-n", ns, "kubevirt.io/extra-")
	if _, still := storedLabels("a")[renamedLabelPrefix+"/extra"]; still {
		t.Error("kubectl label KEY- did not remove the renamed label")
	}

	// patch: merge and JSON on the custom resource, strategic on a built-in kind
	kubectl(t, fx, "patch", "vm", "a", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":{"kubevirt.io/merge":"m"}}}`)
	kubectl(t, fx, "patch", "vm", "a", "-n", ns, "--type=json", "-p", `[{"op":"add","path":"/metadata/labels/kubevirt.io~1json","value":"j"},{"op":"test","path":"/metadata/labels/kubevirt.io~1merge","value":"m"}]`)
	if l := storedLabels("a"); l[renamedLabelPrefix+"/merge"] != "m" || l[renamedLabelPrefix+"/json"] != "j" {
		t.Errorf("merge and JSON patches stored %v", l)
	}
	kubectl(t, fx, "create", "configmap", "cm", "-n", ns, "--from-literal=k=v")
	kubectl(t, fx, "patch", "configmap", "cm", "-n", ns, "--type=strategic", "-p", `{"metadata":{"labels":{"kubevirt.io/smp":"s"},"finalizers":["kubevirt.io/keep"]}}`)
	cm, err := fx.env.Kube.CoreV1().ConfigMaps(ns).Get(testenv.Context(t), "cm", metav1.GetOptions{})
	if err != nil || cm.Labels[renamedLabelPrefix+"/smp"] != "s" || len(cm.Finalizers) != 1 || cm.Finalizers[0] != renamedLabelPrefix+"/keep" {
		t.Errorf("strategic merge patch stored %v %v (%v)", cm.Labels, cm.Finalizers, err)
	}
	kubectl(t, fx, "patch", "configmap", "cm", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers/0"}]`)

	// An owner reference's kind patched on its own is renamed in its group (defect 5): stored as
	// "VirtualMachine", a kind its group does not have, the garbage collector would take the
	// owner for gone and delete the config map.
	uid := string(stored(t, fx, ns, "a").GetUID())
	kubectl(t, fx, "patch", "configmap", "cm", "-n", ns, "--type=merge", "-p",
		`{"metadata":{"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"a","uid":"`+uid+`"}]}}`)
	kubectl(t, fx, "patch", "configmap", "cm", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachine"}]`)
	cm, err = fx.env.Kube.CoreV1().ConfigMaps(ns).Get(testenv.Context(t), "cm", metav1.GetOptions{})
	if err != nil || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Kind != "InternalVirtualizationVirtualMachine" {
		t.Errorf("owner reference after a JSON patch of its kind: %+v (%v)", cm.OwnerReferences, err)
	}

	// edit, with an editor that changes one label value
	editor := write("editor.sh", "#!/bin/sh\nsed -i 's|kubevirt.io/merge: m|kubevirt.io/merge: edited|' \"$1\"\n")
	if err := os.Chmod(editor, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"edit", "vm", "a", "-n", ns}
	t.Setenv("KUBE_EDITOR", editor)
	if out, err := kubectlIn(t, fx, "", cmd...); err != nil {
		t.Fatalf("kubectl edit: %v\n%s", err, out)
	}
	if l := storedLabels("a"); l[renamedLabelPrefix+"/merge"] != "edited" {
		t.Errorf("kubectl edit stored %v", l)
	}

	// describe and events: kubectl describe asks for events without the apiVersion (defect 1).
	for _, obj := range []struct{ kind, apiVersion, name, uid string }{
		{"VirtualMachine", "kubevirt.io/v1", "a", uid},
		{"ConfigMap", "v1", "cm", string(cm.UID)},
	} {
		ev := fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"%s-ev","namespace":"%s"},
			"involvedObject":{"apiVersion":"%s","kind":"%s","name":"%s","namespace":"%s","uid":"%s"},
			"reason":"Seen%s","message":"seen by the test","type":"Normal","source":{"component":"test"}}`,
			strings.ToLower(obj.kind), ns, obj.apiVersion, obj.kind, obj.name, ns, obj.uid, obj.kind)
		if out, err := kubectlIn(t, fx, ev, "create", "-f", "-"); err != nil {
			t.Fatalf("create event: %v\n%s", err, out)
		}
	}
	if out := kubectl(t, fx, "describe", "vm", "a", "-n", ns); !strings.Contains(out, "SeenVirtualMachine") {
		t.Errorf("kubectl describe vm shows no events:\n%s", out)
	}
	if out := kubectl(t, fx, "events", "-n", ns, "--for", "vm/a"); !strings.Contains(out, "SeenVirtualMachine") {
		t.Errorf("kubectl events --for vm/a:\n%s", out)
	}
	if out := kubectl(t, fx, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=ConfigMap,involvedObject.name=cm"); !strings.Contains(out, "SeenConfigMap") {
		t.Errorf("events of a core kind:\n%s", out)
	}
	if out := kubectl(t, fx, "get", "events", "-n", ns); strings.Contains(out, "InternalVirtualization") {
		t.Errorf("kubectl get events shows internal names:\n%s", out)
	}

	// wait and delete
	kubectl(t, fx, "wait", "--for=jsonpath={.metadata.labels.app}=demo2", "vm/a", "-n", ns, "--timeout=30s")
	kubectl(t, fx, "delete", "vm", "s", "-n", ns, "--wait=false")
	kubectl(t, fx, "wait", "--for=delete", "vm/s", "-n", ns, "--timeout=30s")
	kubectl(t, fx, "delete", "-f", filepath.Join(dir, "a.yaml"))
	if out := kubectl(t, fx, "get", "vms", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("VMs left after kubectl delete: %s", out)
	}
}

// curl runs curl against the sidecar and returns its output (headers with -i).
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS"}, args...)...).CombinedOutput()
	if err != nil {
		// --max-time ends a watch with exit code 28: what was received is the answer.
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 28 {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
	}
	// The apiserver indents JSON for curl: compare as if it did not.
	return strings.ReplaceAll(string(out), `": `, `":`)
}

// TestCurlOddSpellings: watches spelled as the apiserver accepts them stream through the
// rewriter event by event (defect 2), a YAML body is rewritten (defect 7), and a watch over
// WebSocket is refused with a Status instead of passed through unrenamed (defect 3).
func TestCurlOddSpellings(t *testing.T) {
	fx := setup(t)
	ns := fx.env.Namespace(t)
	base := fx.modes[0].config.Host
	vms := base + "/apis/kubevirt.io/v1/namespaces/" + ns + "/virtualmachines"

	out := curl(t, "-X", "POST", "-H", "Content-Type: application/yaml", "--data-binary", fmt.Sprintf(kubectlVM, "yaml-vm", ns, "yaml-vm"), vms)
	if !strings.Contains(out, `"kind":"VirtualMachine"`) || strings.Contains(out, "internal.virtualization") {
		t.Fatalf("YAML create answered:\n%s", out)
	}
	if l := stored(t, fx, ns, "yaml-vm").GetLabels(); l[renamedLabelPrefix+"/created-by"] != "kubectl" {
		t.Errorf("YAML create stored labels %v", l)
	}

	// Each watch must deliver the existing VM within the time limit, while the watch is still
	// open: a watch held back until it ends would deliver nothing before curl gives up.
	for _, u := range []string{
		vms + "?watch=True",
		vms + "?watch=yes&resourceVersion=0",
		vms + "?watch",
		base + "/apis/kubevirt.io/v1/watch/namespaces/" + ns + "/virtualmachines",
	} {
		out := curl(t, "-N", "--max-time", "3", u)
		if !strings.Contains(out, `"type":"ADDED"`) || !strings.Contains(out, `"apiVersion":"kubevirt.io/v1"`) || strings.Contains(out, "internal.virtualization") {
			t.Errorf("GET %s delivered:\n%s", u, out)
		}
	}

	// OpenAPI v2 in the component's names, as JSON and as the protobuf client-go asks for.
	out = curl(t, "--max-time", "60", "-H", "Accept: application/json", base+"/openapi/v2")
	if !strings.Contains(out, `"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines"`) || strings.Contains(out, "/apis/internal.virtualization.deckhouse.io/") {
		t.Errorf("OpenAPI v2 through the rewriter lacks kubevirt.io paths or shows renamed ones (%d bytes)", len(out))
	}
	out = curl(t, "-i", "-o", "/dev/null", "-w", "%{http_code} %{content_type}", "--max-time", "60",
		"-H", "Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf", base+"/openapi/v2")
	if !strings.HasSuffix(out, "200 application/com.github.proto-openapi.spec.v2.v1.0+protobuf") {
		t.Errorf("OpenAPI v2 in protobuf: %s", out)
	}

	out = curl(t, "-i", "--max-time", "5", "-H", "Connection: Upgrade", "-H", "Upgrade: websocket",
		"-H", "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", vms+"?watch=true")
	if !strings.Contains(out, "400 Bad Request") || !strings.Contains(out, `"kind":"Status"`) || !strings.Contains(out, "over plain HTTP") {
		t.Errorf("WebSocket watch answered:\n%s", out)
	}
}
