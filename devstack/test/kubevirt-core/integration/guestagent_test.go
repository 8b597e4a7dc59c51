package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// The guest agent subresources answer as KubeVirt's virt-api does before anything reaches a
// node: 500 with the reason as plain text, which client-go (and virtctl) show as "an error on
// the server (...)".
func TestGuestAgentSubresourcesWithoutAgent(t *testing.T) {
	fx := setup(t)
	startVirtAPI(t, fx)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	kube, err := kubernetes.NewForConfig(fx.sidecar)
	if err != nil {
		t.Fatal(err)
	}
	get := func(sub string) (int32, string, error) {
		body, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1", "namespaces", ns, "virtualmachineinstances", "quiet", sub).DoRaw(ctx)
		var code int32 = http.StatusOK
		if se, ok := err.(apierrors.APIStatus); ok {
			code = se.Status().Code
		}
		return code, string(body), err
	}
	// check asks until the answer is want: the fixture's VMI controller may move a VMI without a
	// launcher Pod on, so prepare puts the state back before each try.
	check := func(when, want string, prepare func(*kubevirtv1.VirtualMachineInstance)) {
		t.Helper()
		for _, sub := range []string{"guestosinfo", "userlist", "filesystemlist"} {
			eventually(t, when+", "+sub, func(ctx context.Context) error {
				var vmi kubevirtv1.VirtualMachineInstance
				if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quiet"}, &vmi); err != nil {
					return err
				}
				if prepare != nil {
					prepare(&vmi)
					if err := fx.client.Update(ctx, &vmi); err != nil {
						return err
					}
				}
				code, body, err := get(sub)
				if code != http.StatusInternalServerError || body != want {
					return fmt.Errorf("%d %q, want 500 %q", code, body, want)
				}
				// What virtctl prints.
				if err == nil || !strings.Contains(err.Error(), `an error on the server ("`+strings.ReplaceAll(want, `"`, `\"`)+`")`) {
					return fmt.Errorf("client error %v", err)
				}
				return nil
			})
		}
	}

	if err := fx.client.Create(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quiet"}}); err != nil {
		t.Fatal(err)
	}
	check("pending", `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "quiet": VMI is not running`, nil)
	running := func(vmi *kubevirtv1.VirtualMachineInstance) {
		vmi.Status.Phase, vmi.Status.NodeName = kubevirtv1.Running, "node-a"
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
	}
	check("running without an agent", `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "quiet": VMI does not have guest agent connected`, running)
	// With the agent connected the request goes on to the node, where this test runs no handler.
	check("agent connected, no handler", `virt-handler on node "node-a" is not reachable`, func(vmi *kubevirtv1.VirtualMachineInstance) {
		running(vmi)
		vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
			Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue,
		})
	})
}
