package integration

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/d8virt/devstack/testenv"
)

var widgets = schema.GroupVersionResource{Group: "stack.test.d8v.io", Version: "v1", Resource: "widgets"}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.stack.test.d8v.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgets.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	}
}

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stack.test.d8v.io/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

func TestCustomResourceLifecycle(t *testing.T) {
	env := testenv.Get(t)
	ctx := testenv.Context(t)
	env.InstallCRDs(t, widgetCRD())
	ns := env.Namespace(t)
	api := env.Dynamic.Resource(widgets).Namespace(ns)

	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w, err := api.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	if _, err := api.Create(ctx, widget("a", map[string]any{"size": int64(1)}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	expectEvent(t, w, watch.Added, "a", nil)

	patched, err := api.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"size":2,"color":"red"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if got, _, _ := unstructured.NestedInt64(patched.Object, "spec", "size"); got != 2 {
		t.Fatalf("after merge patch spec.size = %d, want 2", got)
	}
	expectEvent(t, w, watch.Modified, "a", map[string]any{"size": int64(2), "color": "red"})

	if _, err := api.Patch(ctx, "a", types.JSONPatchType,
		[]byte(`[{"op":"test","path":"/spec/color","value":"blue"},{"op":"replace","path":"/spec/size","value":3}]`),
		metav1.PatchOptions{}); err == nil {
		t.Fatal("JSON patch with a failing test op was applied")
	}
	if _, err := api.Patch(ctx, "a", types.JSONPatchType,
		[]byte(`[{"op":"test","path":"/spec/color","value":"red"},{"op":"replace","path":"/spec/size","value":3}]`),
		metav1.PatchOptions{}); err != nil {
		t.Fatalf("JSON patch: %v", err)
	}
	expectEvent(t, w, watch.Modified, "a", map[string]any{"size": int64(3), "color": "red"})

	got, err := api.List(ctx, metav1.ListOptions{})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("list after create: %v items, err %v", len(got.Items), err)
	}
	if err := api.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	expectEvent(t, w, watch.Deleted, "a", nil)
	if _, err := api.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}

func expectEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string, spec map[string]any) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		u, isObj := ev.Object.(*unstructured.Unstructured)
		if ev.Type != typ || !isObj || u.GetName() != name {
			t.Fatalf("watch event %s %T, want %s of %s", ev.Type, ev.Object, typ, name)
		}
		if spec != nil {
			got, _, _ := unstructured.NestedMap(u.Object, "spec")
			for k, v := range spec {
				if got[k] != v {
					t.Fatalf("%s event: spec.%s = %v, want %v", typ, k, got[k], v)
				}
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s event for %s", typ, name)
	}
}

// The garbage collector runs in kube-controller-manager: a dependent whose owner is deleted goes.
func TestGarbageCollectorDeletesDependents(t *testing.T) {
	env := testenv.Get(t)
	ctx := testenv.Context(t)
	env.InstallCRDs(t, widgetCRD())
	ns := env.Namespace(t)
	api := env.Dynamic.Resource(widgets).Namespace(ns)

	owner, err := api.Create(ctx, widget("owner", map[string]any{}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create owner: %v", err)
	}
	dep := widget("dependent", map[string]any{})
	dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "stack.test.d8v.io/v1", Kind: "Widget", Name: "owner", UID: owner.GetUID()}})
	if _, err := api.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create dependent: %v", err)
	}
	// The collector must leave a dependent alone while its owner lives.
	time.Sleep(2 * time.Second)
	if _, err := api.Get(ctx, "dependent", metav1.GetOptions{}); err != nil {
		t.Fatalf("dependent of a live owner: %v", err)
	}
	if err := api.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete owner: %v", err)
	}
	waitGone(ctx, t, api, "dependent")
}

func waitGone(ctx context.Context, t *testing.T, api dynamic.ResourceInterface, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := api.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("%s still exists: %v", name, err)
	}
}
