package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

func newReplicaSet(ns, name string, replicas int32) *kubevirtv1.VirtualMachineInstanceReplicaSet {
	tmpl := newVMI(ns, name)
	return &kubevirtv1.VirtualMachineInstanceReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels},
				Spec:       tmpl.Spec,
			},
		},
	}
}

// activeReplicas lists the VMIs the replica set controls and that are not being deleted.
func activeReplicas(ctx context.Context, fx *fixture, rs *kubevirtv1.VirtualMachineInstanceReplicaSet) ([]kubevirtv1.VirtualMachineInstance, error) {
	var list kubevirtv1.VirtualMachineInstanceList
	if err := fx.client.List(ctx, &list, client.InNamespace(rs.Namespace)); err != nil {
		return nil, err
	}
	var out []kubevirtv1.VirtualMachineInstance
	for _, v := range list.Items {
		if metav1.IsControlledBy(&v, rs) && v.DeletionTimestamp == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// replicasSettle waits for want active VMIs and a status that says so.
func replicasSettle(t *testing.T, fx *fixture, rs *kubevirtv1.VirtualMachineInstanceReplicaSet, want, ready int32) []kubevirtv1.VirtualMachineInstance {
	t.Helper()
	var vmis []kubevirtv1.VirtualMachineInstance
	eventually(t, fmt.Sprintf("%d replicas, %d ready", want, ready), func(ctx context.Context) error {
		var err error
		if vmis, err = activeReplicas(ctx, fx, rs); err != nil {
			return err
		}
		if len(vmis) != int(want) {
			return fmt.Errorf("%d active VMIs", len(vmis))
		}
		var cur kubevirtv1.VirtualMachineInstanceReplicaSet
		if err := fx.client.Get(ctx, client.ObjectKeyFromObject(rs), &cur); err != nil {
			return err
		}
		if st := cur.Status; st.Replicas != want || st.ReadyReplicas != ready || st.LabelSelector != "app="+rs.Name {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	return vmis
}

func TestReplicaSetScalesWithKubectl(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	rs := newReplicaSet(ns, "farm", 2)
	if err := fx.client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	vmis := replicasSettle(t, fx, rs, 2, 0)
	for _, v := range vmis {
		if !strings.HasPrefix(v.Name, "farm") || len(v.Name) == len("farm") || v.Labels["app"] != "farm" ||
			v.OwnerReferences[0].Kind != "VirtualMachineInstanceReplicaSet" {
			t.Errorf("replica %s labels %v owners %+v", v.Name, v.Labels, v.OwnerReferences)
		}
	}

	kc := testenv.RewriterKubeconfig(t, fx.sidecar.Host)
	testenv.Kubectl(t, kc, "scale", "vmirs", "farm", "-n", ns, "--replicas=3")
	vmis = replicasSettle(t, fx, rs, 3, 0)

	// Play virt-handler: one replica runs and is ready.
	keep := vmis[1].Name
	setVMIPhase(t, fx, ns, keep, kubevirtv1.Running, true)
	replicasSettle(t, fx, rs, 3, 1)
	if out := testenv.Kubectl(t, kc, "get", "vmirs", "farm", "-n", ns, "-o", "jsonpath={.status.replicas}/{.status.readyReplicas}"); out != "3/1" {
		t.Errorf("kubectl get vmirs: %q", out)
	}

	// Scaling down keeps the running replica: the ones not yet running go first.
	testenv.Kubectl(t, kc, "scale", "vmirs", "farm", "-n", ns, "--replicas=1")
	vmis = replicasSettle(t, fx, rs, 1, 1)
	if vmis[0].Name != keep {
		t.Errorf("kept %s, want the running %s", vmis[0].Name, keep)
	}

	// A replica that fails is replaced, and the failed VMI removed.
	setVMIPhase(t, fx, ns, keep, kubevirtv1.Failed, false)
	eventually(t, "failed replica replaced", func(ctx context.Context) error {
		vmis, err := activeReplicas(ctx, fx, rs)
		if err != nil {
			return err
		}
		var failed kubevirtv1.VirtualMachineInstance
		err = fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: keep}, &failed)
		if err == nil && failed.DeletionTimestamp == nil {
			return fmt.Errorf("failed VMI %s still there", keep)
		}
		if len(vmis) != 1 || vmis[0].Name == keep {
			return fmt.Errorf("replicas %d", len(vmis))
		}
		return nil
	})

	testenv.Kubectl(t, kc, "scale", "vmirs", "farm", "-n", ns, "--replicas=0")
	replicasSettle(t, fx, rs, 0, 0)
}

func TestReplicaSetPausedDoesNothing(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	rs := newReplicaSet(ns, "still", 2)
	rs.Spec.Paused = true
	if err := fx.client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "paused condition", func(ctx context.Context) error {
		var cur kubevirtv1.VirtualMachineInstanceReplicaSet
		if err := fx.client.Get(ctx, client.ObjectKeyFromObject(rs), &cur); err != nil {
			return err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineInstanceReplicaSetReplicaPaused && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", cur.Status.Conditions)
	})
	if vmis, err := activeReplicas(ctx, fx, rs); err != nil || len(vmis) != 0 {
		t.Fatalf("a paused replica set created %d VMIs (%v)", len(vmis), err)
	}
	// Resuming lets it scale.
	eventually(t, "resume", func(ctx context.Context) error {
		var cur kubevirtv1.VirtualMachineInstanceReplicaSet
		if err := fx.client.Get(ctx, client.ObjectKeyFromObject(rs), &cur); err != nil {
			return err
		}
		cur.Spec.Paused = false
		return fx.client.Update(ctx, &cur)
	})
	replicasSettle(t, fx, rs, 2, 0)
}
