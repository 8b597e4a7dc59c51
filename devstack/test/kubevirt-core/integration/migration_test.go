package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/migration"
)

func newMigration(ns, name, vmiName string) *kubevirtv1.VirtualMachineInstanceMigration {
	return &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: vmiName},
	}
}

func migrationPhase(fx *fixture, m *kubevirtv1.VirtualMachineInstanceMigration, want kubevirtv1.VirtualMachineInstanceMigrationPhase) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := fx.client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.Phase != want {
			return fmt.Errorf("phase %q, want %q", m.Status.Phase, want)
		}
		return nil
	}
}

func failureReason(m *kubevirtv1.VirtualMachineInstanceMigration) string {
	if m.Status.MigrationState == nil {
		return ""
	}
	return m.Status.MigrationState.FailureReason
}

func targetPods(ctx context.Context, fx *fixture, m *kubevirtv1.VirtualMachineInstanceMigration) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := fx.client.List(ctx, &list, client.InNamespace(m.Namespace), client.MatchingLabels{kubevirtv1.MigrationJobLabel: string(m.UID)})
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, err
}

func TestMigrationOfMissingOrStoppedVMIFails(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)

	ghost := newMigration(ns, "ghost", "nobody")
	if err := fx.client.Create(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	eventually(t, "migration of a missing VMI failed", migrationPhase(fx, ghost, kubevirtv1.MigrationFailed))
	if failureReason(ghost) != migration.ReasonVMIMissing || slices.Contains(ghost.Finalizers, kubevirtv1.VirtualMachineInstanceMigrationFinalizer) {
		t.Errorf("reason %q finalizers %v", failureReason(ghost), ghost.Finalizers)
	}

	if err := fx.client.Create(ctx, newVMI(ns, "done")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI scheduling", vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "done"}, kubevirtv1.Scheduling, &kubevirtv1.VirtualMachineInstance{}))
	setVMIPhase(t, fx, ns, "done", kubevirtv1.Succeeded, false)
	stopped := newMigration(ns, "stopped", "done")
	if err := fx.client.Create(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	eventually(t, "migration of a stopped VMI failed", migrationPhase(fx, stopped, kubevirtv1.MigrationFailed))
	if failureReason(stopped) != migration.ReasonVMIShutdown {
		t.Errorf("reason %q", failureReason(stopped))
	}
	if pods, err := targetPods(ctx, fx, stopped); err != nil || len(pods) != 0 {
		t.Errorf("target pods %d, %v", len(pods), err)
	}
}

func TestMigrationSchedulesTargetOneAtATime(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	node := "mig-src-" + ns
	// No heartbeat: the node controller leaves this node's VMIs alone.
	fakeNode(t, fx, node)

	key := client.ObjectKey{Namespace: ns, Name: "mover"}
	vmi := newVMI(ns, "mover")
	if err := fx.client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI scheduling", vmiPhase(fx, key, kubevirtv1.Scheduling, vmi))
	placeVMI(t, fx, key, node)

	first := newMigration(ns, "first", "mover")
	if err := fx.client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "first migration scheduling", migrationPhase(fx, first, kubevirtv1.MigrationScheduling))
	var target corev1.Pod
	eventually(t, "target pod", func(ctx context.Context) error {
		pods, err := targetPods(ctx, fx, first)
		if err != nil || len(pods) != 1 {
			return fmt.Errorf("%d target pods (%v)", len(pods), err)
		}
		target = pods[0]
		return nil
	})
	if !metav1.IsControlledBy(&target, vmi) || target.Labels[kubevirtv1.CreatedByLabel] != string(vmi.UID) ||
		target.Annotations[kubevirtv1.MigrationJobNameAnnotation] != "first" || target.Spec.Affinity == nil || target.Spec.Affinity.PodAntiAffinity == nil {
		t.Errorf("target pod owners %v labels %v annotations %v affinity %+v", target.OwnerReferences, target.Labels, target.Annotations, target.Spec.Affinity)
	}
	// The reference module's network priorities: the source keeps the VM's address, the target
	// shares it.
	if target.Labels[migration.NetworkPriorityLabel] != migration.PriorityTarget {
		t.Errorf("target pod labels %v, want %s=%s", target.Labels, migration.NetworkPriorityLabel, migration.PriorityTarget)
	}
	if st := first.Status.MigrationState; st == nil || st.SourcePod == "" {
		t.Errorf("no source pod in %+v", st)
	} else if src, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, st.SourcePod, metav1.GetOptions{}); err != nil || src.Labels[migration.NetworkPriorityLabel] != migration.PrioritySource {
		t.Errorf("source pod %s: %v, labels %v", st.SourcePod, err, src.GetLabels())
	}
	if !slices.Contains(first.Finalizers, kubevirtv1.VirtualMachineInstanceMigrationFinalizer) || first.Labels[kubevirtv1.MigrationSelectorLabel] != "mover" ||
		first.Status.MigrationState == nil || first.Status.MigrationState.SourceNode != node {
		t.Errorf("first migration: finalizers %v labels %v state %+v", first.Finalizers, first.Labels, first.Status.MigrationState)
	}

	// A second migration of the same VMI waits in Pending, as in KubeVirt, without a target pod.
	second := newMigration(ns, "second", "mover")
	if err := fx.client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "second migration pending", migrationPhase(fx, second, kubevirtv1.MigrationPending))
	time.Sleep(2 * time.Second)
	if err := migrationPhase(fx, second, kubevirtv1.MigrationPending)(ctx); err != nil {
		t.Fatalf("second migration: %v", err)
	}
	if pods, err := targetPods(ctx, fx, second); err != nil || len(pods) != 0 {
		t.Fatalf("second migration has %d target pods (%v)", len(pods), err)
	}

	// Deleting the first aborts it: its target pod goes, the finalizer lets it go, and the second
	// may start.
	if err := fx.client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, "first migration gone", func(ctx context.Context) error {
		if err := fx.client.Get(ctx, client.ObjectKeyFromObject(first), first); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (phase %q, finalizers %v): %v", first.Status.Phase, first.Finalizers, err)
		}
		if _, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, target.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("target pod still there: %v", err)
		}
		return nil
	})
	eventually(t, "second migration scheduling", migrationPhase(fx, second, kubevirtv1.MigrationScheduling))

	// The guest stops: the migration fails and its target pod is removed.
	setVMIPhase(t, fx, ns, "mover", kubevirtv1.Failed, false)
	eventually(t, "second migration failed", migrationPhase(fx, second, kubevirtv1.MigrationFailed))
	if failureReason(second) != migration.ReasonVMIShutdown {
		t.Errorf("reason %q", failureReason(second))
	}
	eventually(t, "second target pod removed", func(ctx context.Context) error {
		pods, err := targetPods(ctx, fx, second)
		if err != nil || len(pods) != 0 {
			return fmt.Errorf("%d target pods (%v)", len(pods), err)
		}
		return nil
	})
}
