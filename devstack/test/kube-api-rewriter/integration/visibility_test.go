package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// kubectl through the sidecar sees KubeVirt's API with its printer columns; directly it sees the
// renamed one.
func TestKubectlThroughProxy(t *testing.T) {
	fx := setup(t)
	sidecar := fx.modes[0]
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	c := sidecar.typed(t)
	if err := c.Create(ctx, newVM(ns, "printed")); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "printed"}}); err != nil {
		t.Fatal(err)
	}

	out := testenv.Kubectl(t, sidecar.kubeconfig, "get", "vms,vmis", "-n", ns)
	for _, want := range []string{
		"virtualmachine.kubevirt.io/printed", "virtualmachineinstance.kubevirt.io/printed",
		"STATUS", "READY", "PHASE", "IP", "NODENAME",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get vms,vmis through the proxy lacks %q:\n%s", want, out)
		}
	}
	if header := strings.Fields(strings.SplitN(out, "\n", 2)[0]); strings.Join(header, " ") != "NAME AGE STATUS READY" {
		t.Errorf("VM columns %v, want KubeVirt's NAME AGE STATUS READY", header)
	}

	// kubectl explain reads OpenAPI v3, which the rewriter serves in KubeVirt's names.
	// (The test CRDs have open spec schemas; the generated ones in crds/ have every field.)
	explain := testenv.Kubectl(t, sidecar.kubeconfig, "explain", "vm.spec")
	for _, want := range []string{"GROUP:      kubevirt.io", "KIND:       VirtualMachine", "FIELD: spec <Object>"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain through the proxy lacks %q:\n%s", want, explain)
		}
	}

	viaProxy := testenv.Kubectl(t, sidecar.kubeconfig, "api-resources")
	direct := testenv.Kubectl(t, fx.env.Kubeconfig, "api-resources")
	if !strings.Contains(viaProxy, "kubevirt.io/v1") || strings.Contains(viaProxy, "internal.virtualization.deckhouse.io") {
		t.Errorf("api-resources through the proxy:\n%s", viaProxy)
	}
	if !strings.Contains(viaProxy, "vm,vms") {
		t.Errorf("api-resources through the proxy lacks KubeVirt's short names:\n%s", viaProxy)
	}
	if !strings.Contains(direct, "internal.virtualization.deckhouse.io/v1") || !strings.Contains(direct, "intvirtvm") {
		t.Errorf("api-resources directly lacks the renamed group:\n%s", direct)
	}
	for _, line := range strings.Split(direct, "\n") {
		if strings.Contains(line, " kubevirt.io/v1 ") {
			t.Errorf("api-resources directly shows an original group: %s", line)
		}
	}
}

// A stock KubeVirt's CRDs and objects in the same cluster stay invisible through the rewriter,
// and what the component writes never loses the stock keys.
func TestStockKubeVirtStaysInvisible(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	stockCRDs, err := os.ReadFile("testdata/kubevirt-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crds, err := testenv.DecodeCRDs(stockCRDs)
	if err != nil {
		t.Fatal(err)
	}
	fx.env.InstallCRDs(t, crds...)
	t.Cleanup(func() {
		for _, crd := range crds {
			_ = fx.env.Ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
		}
	})
	ns := fx.env.Namespace(t)
	stockVM := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "stock", "labels": map[string]any{"kubevirt.io/origin": "stock"}},
		"spec":     map[string]any{"runStrategy": "Halted"},
	}}
	if _, err := fx.env.Dynamic.Resource(originalVMs).Namespace(ns).Create(ctx, stockVM, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create stock VM directly: %v", err)
	}
	stockPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stock-launcher", Labels: map[string]string{"kubevirt.io": "virt-launcher"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
	}
	if _, err := fx.env.Kube.CoreV1().Pods(ns).Create(ctx, stockPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, m := range fx.modes {
		t.Run(m.name, func(t *testing.T) {
			c := m.typed(t)
			if err := c.Create(ctx, newVM(ns, "ours-"+m.name)); err != nil {
				t.Fatal(err)
			}
			var vms kubevirtv1.VirtualMachineList
			if err := c.List(ctx, &vms, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, vm := range vms.Items {
				if vm.Name == "stock" {
					t.Error("the stock VM is visible through the rewriter")
				}
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stock"}, &kubevirtv1.VirtualMachine{}); !apierrors.IsNotFound(err) {
				t.Errorf("get stock VM through the rewriter: %v, want NotFound", err)
			}

			var crdList apiextensionsv1.CustomResourceDefinitionList
			if err := c.List(ctx, &crdList); err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, crd := range crdList.Items {
				if crd.Spec.Group == "internal.virtualization.deckhouse.io" {
					t.Errorf("renamed CRD %s visible through the rewriter", crd.Name)
				}
				if crd.Name == "virtualmachines.kubevirt.io" {
					seen++
					if crd.Spec.Names.Kind != "VirtualMachine" || len(crd.Spec.Names.ShortNames) == 0 || crd.Spec.Names.ShortNames[0] != "vm" {
						t.Errorf("restored CRD names %+v", crd.Spec.Names)
					}
				}
			}
			if seen != 1 {
				t.Errorf("the component sees %d CRDs for VirtualMachine, want exactly 1", seen)
			}

			dc, err := discovery.NewDiscoveryClientForConfig(m.config)
			if err != nil {
				t.Fatal(err)
			}
			groups, err := dc.ServerGroups()
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, g := range groups.Groups {
				if strings.HasPrefix(g.Name, "internal.") || strings.Contains(g.Name, ".internal.") {
					t.Errorf("discovery shows renamed group %s", g.Name)
				}
				if g.Name == "kubevirt.io" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("discovery shows kubevirt.io %d times, want once", n)
			}

			// The stock pod's original key reaches the component under the preserved prefix, and an
			// update by the component keeps it in the cluster.
			var pod corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stock-launcher"}, &pod); err != nil {
				t.Fatal(err)
			}
			if _, clash := pod.Labels["kubevirt.io"]; clash {
				t.Errorf("the stock key reached the component as its own: %v", pod.Labels)
			}
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations["touched-by"] = m.name
			if err := c.Update(ctx, &pod); err != nil {
				t.Fatalf("update stock pod: %v", err)
			}
			direct, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, "stock-launcher", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if direct.Labels["kubevirt.io"] != "virt-launcher" || len(direct.Labels) != 1 || direct.Annotations["touched-by"] != m.name {
				t.Errorf("after the component's update the cluster has labels %v annotations %v", direct.Labels, direct.Annotations)
			}
		})
	}
	direct, err := fx.env.Dynamic.Resource(originalVMs).Namespace(ns).Get(ctx, "stock", metav1.GetOptions{})
	if err != nil || direct.GetLabels()["kubevirt.io/origin"] != "stock" {
		t.Errorf("stock VM after the test: %v, labels %v", err, direct.GetLabels())
	}
}
