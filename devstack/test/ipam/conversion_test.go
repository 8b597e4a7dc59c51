package ipam

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/classcrd"
	"github.com/d8virt/virtualization-controller/pkg/webhook/classconversion"
)

// newV1alpha2Class is a class with two sizing policies written in v1alpha2's numbers.
func newV1alpha2Class(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "virtualization.deckhouse.io/v1alpha2", "kind": "VirtualMachineClass",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"test": "conversion"}},
		"spec": map[string]any{
			"cpu":          map[string]any{"type": "Host"},
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/os": "linux"}},
			"sizingPolicies": []any{
				map[string]any{"cores": map[string]any{"min": int64(1), "max": int64(4)}, "coreFractions": []any{int64(5), int64(50), int64(100)}, "defaultCoreFraction": int64(50)},
				map[string]any{"cores": map[string]any{"min": int64(5), "max": int64(8)}, "coreFractions": []any{int64(100)}},
			},
		},
	}}
}

func classes(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "virtualization.deckhouse.io", Version: version, Resource: "virtualmachineclasses"}
}

// TestConversionThroughTheApiserver points the VirtualMachineClass CRD at the webhook, has the
// apiserver convert each way, round trip exactly, and migrate stored objects.
func TestConversionThroughTheApiserver(t *testing.T) {
	env := testenv.Get(t)
	setupCRDs(t, env)
	c := startController(t, env)
	ctx := testenv.Context(t)
	url := c.url + classconversion.Path
	m := classcrd.NewMigrator(env.Ext, env.Dynamic, apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: c.ca}, testr.New(t), 200*time.Millisecond)
	if err := m.PatchConversion(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Back to what the CRD file says, for the other test binaries of a shared stack.
		patch := []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)
		if _, err := env.Ext.ApiextensionsV1().CustomResourceDefinitions().Patch(context.Background(), classcrd.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("set the conversion back to None: %v", err)
		}
	})
	crd, err := env.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, classcrd.Name, metav1.GetOptions{})
	if err != nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Fatalf("conversion: %v, %+v", err, crd.Spec.Conversion)
	}

	// The apiserver may need a moment before it calls the new webhook: until then a create is
	// stored unconverted. Each try uses a fresh name and deletes what the apiserver did not convert.
	want := `[{"coreFractions":["5%","50%","100%"],"cores":{"max":4,"min":1},"defaultCoreFraction":"50%"},{"coreFractions":["100%"],"cores":{"max":8,"min":5}}]`
	var name string
	var created, v3 *unstructured.Unstructured
	poll(t, 30*time.Second, "a v1alpha2 class created and converted by the webhook", func() (bool, string) {
		try := "conv-" + dnsSuffix()
		created, err = env.Dynamic.Resource(classes("v1alpha2")).Create(ctx, newV1alpha2Class(try), metav1.CreateOptions{})
		if err != nil {
			return false, errString(err)
		}
		name = try
		t.Cleanup(func() {
			_ = env.Dynamic.Resource(classes("v1alpha3")).Delete(context.Background(), try, metav1.DeleteOptions{})
		})
		v3, err = env.Dynamic.Resource(classes("v1alpha3")).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, errString(err)
		}
		policies, _, _ := unstructured.NestedSlice(v3.Object, "spec", "sizingPolicies")
		got, _ := json.Marshal(policies)
		if string(got) == want {
			return true, ""
		}
		_ = env.Dynamic.Resource(classes("v1alpha3")).Delete(ctx, name, metav1.DeleteOptions{})
		return false, "v1alpha3 sizing policies " + string(got)
	})
	if v3.GetAPIVersion() != "virtualization.deckhouse.io/v1alpha3" {
		t.Fatalf("apiVersion %s", v3.GetAPIVersion())
	}

	// Back to v1alpha2, exactly as created (the spec and the metadata the user wrote).
	back, err := env.Dynamic.Resource(classes("v1alpha2")).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Object["spec"], created.Object["spec"]) || !reflect.DeepEqual(back.GetLabels(), created.GetLabels()) || len(back.GetAnnotations()) != 0 {
		t.Fatalf("round trip:\n got %v %v\nwant %v %v", back.Object["spec"], back.GetAnnotations(), created.Object["spec"], created.GetLabels())
	}

	// An update through v1alpha3 reads back in v1alpha2.
	policies, _, _ := unstructured.NestedSlice(v3.Object, "spec", "sizingPolicies")
	policies[1].(map[string]any)["coreFractions"] = []any{"25%", "100%"}
	if err := unstructured.SetNestedSlice(v3.Object, policies, "spec", "sizingPolicies"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(classes("v1alpha3")).Update(ctx, v3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	back, err = env.Dynamic.Resource(classes("v1alpha2")).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, _, _ := unstructured.NestedSlice(back.Object, "spec", "sizingPolicies")
	if got, _ := json.Marshal(second[1].(map[string]any)["coreFractions"]); string(got) != "[25,100]" {
		t.Fatalf("v1alpha2 after a v1alpha3 update: %s", got)
	}

	// Storage migration: a CRD that still lists v1alpha2 as stored lists only v1alpha3 after.
	crd, err = env.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, classcrd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(crd.Status.StoredVersions, "v1alpha2") {
		crd.Status.StoredVersions = append([]string{"v1alpha2"}, crd.Status.StoredVersions...)
		if _, err := env.Ext.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := env.Dynamic.Resource(classes("v1alpha3")).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	crd, err = env.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, classcrd.Name, metav1.GetOptions{})
	if err != nil || !slices.Equal(crd.Status.StoredVersions, []string{"v1alpha3"}) {
		t.Fatalf("storedVersions after the migration: %v, %v", err, crd.Status.StoredVersions)
	}
	after, err := env.Dynamic.Resource(classes("v1alpha3")).Get(ctx, name, metav1.GetOptions{})
	if err != nil || !reflect.DeepEqual(after.Object["spec"], before.Object["spec"]) {
		t.Fatalf("the class after the migration: %v, %v", err, after.Object["spec"])
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func dnsSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
