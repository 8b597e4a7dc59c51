package chart

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/d8virt/devstack/testenv"
)

var kubeVirtGVR = schema.GroupVersionResource{
	Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationkubevirts",
}

var classGVR = schema.GroupVersionResource{Group: "virtualization.deckhouse.io", Version: "v1alpha3", Resource: "virtualmachineclasses"}

// helm install, upgrade and uninstall against the apiserver (no node runs the pods): the
// KubeVirt resource maps on install (its CRD comes from crds/), an upgrade with the same values
// changes no pod template and keeps the serving certificate, a value of the installed components
// changes only the KubeVirt resource, a changed log level rolls
// virt-operator, and uninstall leaves the KubeVirt resource (and so the installed components
// and the virtual machines) while it removes the chart's own objects.
//
// Not parallel: the release's cluster-scoped objects of fixed names (the APIService) would make
// the other tests' helm install --dry-run=server fail on their ownership.
func TestInstallUpgradeUninstall(t *testing.T) {
	env := testenv.Get(t)
	installCRDs(t, env)
	ns := env.Namespace(t)
	ctx := testenv.Context(t)
	var b [3]byte
	_, _ = rand.Read(b[:])
	// Cluster-scoped objects carry the release name: unique, as test binaries may share a stack.
	rel := "virt-" + hex.EncodeToString(b[:])
	run := func(args ...string) {
		t.Helper()
		all := append(args, "--namespace", ns, "--kubeconfig", env.Kubeconfig)
		if out, err := helm(t, all...); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() { _, _ = helm(t, "uninstall", rel, "--namespace", ns, "--kubeconfig", env.Kubeconfig) })
	// The class generic is kept on uninstall (machines use it): the next release must not find it.
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(classGVR).Delete(context.Background(), "generic", metav1.DeleteOptions{})
	})

	run("install", rel, chartDir(t))
	deployments := env.Kube.AppsV1().Deployments(ns)
	dep, err := deployments.Get(ctx, "virt-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "virt-operator-metrics-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(kubeVirtGVR).Namespace(ns).Get(ctx, "kubevirt", metav1.GetOptions{}); err != nil {
		t.Fatalf("the KubeVirt resource: %v", err)
	}

	// Helm never updates CRDs: the documented upgrade applies them first.
	crds, err := helm(t, "show", "crds", chartDir(t))
	if err != nil {
		t.Fatalf("helm show crds: %v\n%s", err, crds)
	}
	if out, err := testenv.KubectlInput(t, env.Kubeconfig, crds, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
		t.Fatalf("helm show crds | kubectl apply --server-side: %v\n%s", err, out)
	}
	run("upgrade", rel, chartDir(t))
	again, err := deployments.Get(ctx, "virt-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Generation != dep.Generation {
		t.Errorf("an upgrade with the same values changed virt-operator's Deployment (generation %d -> %d)", dep.Generation, again.Generation)
	}
	kept, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, secret.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(kept.Data["tls.crt"]) != string(secret.Data["tls.crt"]) {
		t.Errorf("an upgrade issued a new serving certificate")
	}

	// Values of the installed components go to the KubeVirt resource only.
	run("upgrade", rel, chartDir(t), "--reuse-values", "--set", "replicas.core=3,featureGates={HotplugVolumes}")
	if d, err := deployments.Get(ctx, "virt-operator", metav1.GetOptions{}); err != nil || d.Generation != again.Generation {
		t.Errorf("replicas.core and featureGates changed virt-operator's Deployment: %v", err)
	}
	kv, err := env.Dynamic.Resource(kubeVirtGVR).Namespace(ns).Get(ctx, "kubevirt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(kv.Object, "spec", "infra", "replicas"); r != 3 {
		t.Errorf("KubeVirt spec.infra.replicas %d after the upgrade, want 3", r)
	}

	run("upgrade", rel, chartDir(t), "--reuse-values", "--set", "logLevel=debug")
	rolled, err := deployments.Get(ctx, "virt-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rolled.Generation == again.Generation {
		t.Errorf("logLevel=debug did not change virt-operator's pod template")
	}

	run("uninstall", rel, "--wait")
	if _, err := deployments.Get(ctx, "virt-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("virt-operator's Deployment after uninstall: %v", err)
	}
	if _, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, rel+"-virt-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("virt-operator's ClusterRole after uninstall: %v", err)
	}
	if _, err := env.Dynamic.Resource(kubeVirtGVR).Namespace(ns).Get(ctx, "kubevirt", metav1.GetOptions{}); err != nil {
		t.Errorf("helm uninstall removed the KubeVirt resource: %v", err)
	}
	if _, err := env.Ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, kubeVirtGVR.GroupResource().String(), metav1.GetOptions{}); err != nil {
		t.Errorf("helm uninstall removed the KubeVirt CRD: %v", err)
	}
	if c, err := env.Dynamic.Resource(classGVR).Get(ctx, "generic", metav1.GetOptions{}); err != nil || c.GetAnnotations()["virtualmachineclass.virtualization.deckhouse.io/is-default-class"] != "true" {
		t.Errorf("helm uninstall removed the default class generic: %v", err)
	}
}
