package transport_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kube-api-rewriter/pkg/transport"
)

// A program that speaks kubevirt.io creates a VirtualMachine through a wrapped rest.Config. The
// cluster (here an httptest server that stores nothing and answers with what it was sent) only
// ever sees the renamed group, resource, kind and label; the program gets its own names back.
func ExampleWrap() {
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println("cluster sees:", r.Method, r.URL.Path)
		fmt.Println("cluster sees:", strings.TrimSpace(string(body)))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	defer apiserver.Close()

	cfg := transport.Wrap(&rest.Config{Host: apiserver.URL}, transport.Options{Rewriter: rewrite.New(rules.Default())})
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	vms := client.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"})
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata": map[string]any{
			"name":   "vm1",
			"labels": map[string]any{"kubevirt.io/vm": "vm1"},
		},
	}}
	created, err := vms.Namespace("default").Create(context.Background(), vm, metav1.CreateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("program sees:", created.GetAPIVersion(), created.GetKind(), created.GetLabels())
	// Output:
	// cluster sees: POST /apis/internal.virtualization.deckhouse.io/v1/namespaces/default/internalvirtualizationvirtualmachines
	// cluster sees: {"apiVersion":"internal.virtualization.deckhouse.io/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"labels":{"kubevirt.internal.virtualization.deckhouse.io/vm":"vm1"},"name":"vm1"}}
	// program sees: kubevirt.io/v1 VirtualMachine map[kubevirt.io/vm:vm1]
}
