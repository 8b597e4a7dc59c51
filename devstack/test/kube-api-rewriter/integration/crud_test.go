package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

const (
	renamedLabelPrefix = "kubevirt.internal.virtualization.deckhouse.io"
	runStrategyHalted  = kubevirtv1.RunStrategyHalted
)

func newVM(ns, name string) *kubevirtv1.VirtualMachine {
	rs := runStrategyHalted
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:      map[string]string{"kubevirt.io/vm": name, "app": "demo"},
			Annotations: map[string]string{"kubevirt.io/latest-observed-api-version": "v1"},
		},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &rs,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/domain": name}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{}},
				},
			},
		},
	}
}

// stored reads an object as the cluster holds it, bypassing the rewriter.
func stored(t *testing.T, fx *fixture, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := fx.env.Dynamic.Resource(internalVMs).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read %s/%s directly: %v", ns, name, err)
	}
	return u
}

func TestVirtualMachineCRUD(t *testing.T) {
	forEachMode(t, func(t *testing.T, fx *fixture, m mode) {
		ctx := testenv.Context(t)
		ns := fx.env.Namespace(t)
		c := m.typed(t)

		// Watch with a kubevirt.io label selector before anything exists.
		w, err := c.Watch(ctx, &kubevirtv1.VirtualMachineList{}, client.InNamespace(ns), client.MatchingLabels{"kubevirt.io/vm": "a"})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()

		vm := newVM(ns, "a")
		if err := c.Create(ctx, vm); err != nil {
			t.Fatalf("create: %v", err)
		}
		if vm.APIVersion != "" && vm.APIVersion != "kubevirt.io/v1" {
			t.Errorf("created object came back as %s", vm.APIVersion)
		}
		ev := nextEvent(t, w)
		if ev.Type != watch.Added || ev.Object.(*kubevirtv1.VirtualMachine).Name != "a" {
			t.Fatalf("first event %s %v, want ADDED a", ev.Type, ev.Object)
		}
		if err := c.Create(ctx, newVM(ns, "b")); err != nil {
			t.Fatalf("create b: %v", err)
		}

		// The cluster stores the renamed kind with renamed keys; the value rules leave "app" alone.
		u := stored(t, fx, ns, "a")
		if u.GetKind() != "InternalVirtualizationVirtualMachine" || u.GetAPIVersion() != "internal.virtualization.deckhouse.io/v1" {
			t.Errorf("stored as %s %s", u.GetAPIVersion(), u.GetKind())
		}
		if u.GetLabels()[renamedLabelPrefix+"/vm"] != "a" || u.GetLabels()["app"] != "demo" || u.GetLabels()["kubevirt.io/vm"] != "" {
			t.Errorf("stored labels %v", u.GetLabels())
		}
		if _, ok := u.GetAnnotations()[renamedLabelPrefix+"/latest-observed-api-version"]; !ok {
			t.Errorf("stored annotations %v", u.GetAnnotations())
		}
		var got kubevirtv1.VirtualMachine
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &got); err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Labels["kubevirt.io/vm"] != "a" || got.Spec.Template.ObjectMeta.Labels["kubevirt.io/domain"] != "a" {
			t.Errorf("get restored labels %v, template %v", got.Labels, got.Spec.Template.ObjectMeta.Labels)
		}

		var list kubevirtv1.VirtualMachineList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"kubevirt.io/vm": "b"}); err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "b" {
			t.Fatalf("list by kubevirt.io/vm=b returned %d items", len(list.Items))
		}

		// Update.
		got.Labels["kubevirt.io/size"] = "small"
		if err := c.Update(ctx, &got); err != nil {
			t.Fatalf("update: %v", err)
		}
		expectModified(t, w, func(vm *kubevirtv1.VirtualMachine) bool { return vm.Labels["kubevirt.io/size"] == "small" })

		// JSON patch whose test op checks a kubevirt.io label: a wrong value fails, the right one applies.
		bad := []byte(`[{"op":"test","path":"/metadata/labels/kubevirt.io~1size","value":"large"},{"op":"add","path":"/metadata/labels/kubevirt.io~1patched","value":"json"}]`)
		if err := c.Patch(ctx, &got, client.RawPatch(types.JSONPatchType, bad)); err == nil || !apierrors.IsInvalid(err) {
			t.Fatalf("JSON patch with a failing test op: %v", err)
		}
		good := []byte(`[{"op":"test","path":"/metadata/labels/kubevirt.io~1size","value":"small"},{"op":"add","path":"/metadata/labels/kubevirt.io~1patched","value":"json"},{"op":"add","path":"/metadata/finalizers","value":["kubevirt.io/test-protection"]}]`)
		if err := c.Patch(ctx, &got, client.RawPatch(types.JSONPatchType, good)); err != nil {
			t.Fatalf("JSON patch: %v", err)
		}
		if got.Labels["kubevirt.io/patched"] != "json" {
			t.Errorf("after JSON patch labels %v", got.Labels)
		}
		expectModified(t, w, func(vm *kubevirtv1.VirtualMachine) bool { return vm.Labels["kubevirt.io/patched"] == "json" })
		if f := stored(t, fx, ns, "a").GetFinalizers(); len(f) != 1 || f[0] != renamedLabelPrefix+"/test-protection" {
			t.Errorf("stored finalizers %v", f)
		}

		// Merge patch.
		merge := []byte(`{"metadata":{"labels":{"kubevirt.io/patched":"merge","kubevirt.io/size":null}}}`)
		if err := c.Patch(ctx, &got, client.RawPatch(types.MergePatchType, merge)); err != nil {
			t.Fatalf("merge patch: %v", err)
		}
		if got.Labels["kubevirt.io/patched"] != "merge" || got.Labels["kubevirt.io/size"] != "" {
			t.Errorf("after merge patch labels %v", got.Labels)
		}

		// Server-side apply (YAML) through the dynamic client.
		apply := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
			"metadata": map[string]any{"name": "a", "namespace": ns, "labels": map[string]any{"kubevirt.io/applied": "yes"}},
		}}
		applied, err := m.dynamic(t).Resource(originalVMs).Namespace(ns).Apply(ctx, "a", apply, metav1.ApplyOptions{FieldManager: "rewriter-test"})
		if err != nil {
			t.Fatalf("server-side apply: %v", err)
		}
		if applied.GetLabels()["kubevirt.io/applied"] != "yes" || applied.GetKind() != "VirtualMachine" {
			t.Errorf("apply result %s labels %v", applied.GetKind(), applied.GetLabels())
		}
		if stored(t, fx, ns, "a").GetLabels()[renamedLabelPrefix+"/applied"] != "yes" {
			t.Error("applied label not stored renamed")
		}

		// Delete with a kubevirt.io finalizer: the object stays until the finalizer is removed.
		if err := c.Delete(ctx, &got); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &got); err != nil || got.DeletionTimestamp == nil {
			t.Fatalf("after delete with finalizer: err %v, deletionTimestamp %v", err, got.DeletionTimestamp)
		}
		if len(got.Finalizers) != 1 || got.Finalizers[0] != "kubevirt.io/test-protection" {
			t.Fatalf("finalizers seen by the component %v", got.Finalizers)
		}
		if err := c.Patch(ctx, &got, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"kubevirt.io/test-protection"},{"op":"remove","path":"/metadata/finalizers/0"}]`))); err != nil {
			t.Fatalf("remove finalizer: %v", err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &kubevirtv1.VirtualMachine{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatal("VM still exists after its finalizer was removed")
		}
		for {
			ev := nextEvent(t, w)
			if ev.Type == watch.Deleted {
				break
			}
		}

		// A 404 names the kind the client asked for.
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "missing"}, &kubevirtv1.VirtualMachine{})
		var status apierrors.APIStatus
		if !apierrors.IsNotFound(err) || !asStatus(err, &status) || status.Status().Details.Group != "kubevirt.io" || status.Status().Details.Kind != "virtualmachines" {
			t.Errorf("404: %v (%+v)", err, status)
		}
	})
}

func asStatus(err error, s *apierrors.APIStatus) bool {
	st, ok := err.(apierrors.APIStatus)
	if ok {
		*s = st
	}
	return ok
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		if ev.Type == watch.Error {
			b, _ := json.Marshal(ev.Object)
			t.Fatalf("watch error: %s", b)
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return watch.Event{}
}

func expectModified(t *testing.T, w watch.Interface, ok func(*kubevirtv1.VirtualMachine) bool) {
	t.Helper()
	for {
		ev := nextEvent(t, w)
		vm, isVM := ev.Object.(*kubevirtv1.VirtualMachine)
		if !isVM {
			t.Fatalf("watch delivered %T", ev.Object)
		}
		if ev.Type == watch.Modified && ok(vm) {
			return
		}
	}
}

// The garbage collector only works if ownerReferences are renamed: it resolves the owner's
// apiVersion and kind in the cluster.
func TestGarbageCollectorDeletesVMIOwnedByVM(t *testing.T) {
	forEachMode(t, func(t *testing.T, fx *fixture, m mode) {
		ctx := testenv.Context(t)
		ns := fx.env.Namespace(t)
		c := m.typed(t)
		vm := newVM(ns, "owner")
		if err := c.Create(ctx, vm); err != nil {
			t.Fatalf("create VM: %v", err)
		}
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "owner",
			Labels:          map[string]string{"kubevirt.io/created-by": string(vm.UID)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
		}}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatalf("create VMI: %v", err)
		}
		direct, err := fx.env.Dynamic.Resource(internalVMIs).Namespace(ns).Get(ctx, "owner", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs := direct.GetOwnerReferences()
		if len(refs) != 1 || refs[0].APIVersion != "internal.virtualization.deckhouse.io/v1" || refs[0].Kind != "InternalVirtualizationVirtualMachine" {
			t.Fatalf("stored ownerReferences %+v", refs)
		}
		var back kubevirtv1.VirtualMachineInstance
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), &back); err != nil {
			t.Fatal(err)
		}
		if back.OwnerReferences[0].APIVersion != "kubevirt.io/v1" || back.OwnerReferences[0].Kind != "VirtualMachine" {
			t.Fatalf("restored ownerReferences %+v", back.OwnerReferences)
		}
		// The collector keeps the VMI while its owner lives...
		time.Sleep(2 * time.Second)
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), &back); err != nil {
			t.Fatalf("VMI of a live VM: %v", err)
		}
		// ...and deletes it with its owner.
		if err := c.Delete(ctx, vm, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(vmi), &back)), nil
		}); err != nil {
			t.Fatal("garbage collector did not delete the VMI of a deleted VM")
		}
	})
}

// Pods are native, but carry kubevirt.io keys; they are stored renamed and read back original.
func TestPodLabelsRenamed(t *testing.T) {
	forEachMode(t, func(t *testing.T, fx *fixture, m mode) {
		ctx := testenv.Context(t)
		ns := fx.env.Namespace(t)
		c := m.typed(t)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-launcher-x", Labels: map[string]string{
				"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "uid", "vm.kubevirt.io/name": "x",
			}},
			Spec: corev1.PodSpec{
				Containers:   []corev1.Container{{Name: "compute", Image: "virt-launcher"}},
				NodeSelector: map[string]string{"kubevirt.io/schedulable": "true"},
			},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatalf("create pod: %v", err)
		}
		direct, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if direct.Labels[renamedLabelPrefix] != "virt-launcher" || direct.Labels["vm.kubevirt.internal.virtualization.deckhouse.io/name"] != "x" ||
			direct.Spec.NodeSelector[renamedLabelPrefix+"/schedulable"] != "true" || len(direct.Labels) != 3 {
			t.Errorf("stored pod labels %v, nodeSelector %v", direct.Labels, direct.Spec.NodeSelector)
		}
		var back corev1.PodList
		if err := c.List(ctx, &back, client.InNamespace(ns), client.MatchingLabels{"kubevirt.io": "virt-launcher"}); err != nil {
			t.Fatal(err)
		}
		if len(back.Items) != 1 || back.Items[0].Labels["kubevirt.io/created-by"] != "uid" || back.Items[0].Spec.NodeSelector["kubevirt.io/schedulable"] != "true" {
			t.Fatalf("pods read back: %+v", back.Items)
		}
	})
}
