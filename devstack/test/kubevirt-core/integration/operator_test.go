package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

const managedByRenamed = "virt-operator-internal-virtualization"

var internalKubeVirts = schema.GroupVersionResource{Group: renamedGroup, Version: "v1", Resource: "internalvirtualizationkubevirts"}

// operatorConfig is what the local stack runs the operator with.
func operatorConfig() virtoperator.Config {
	cfg := virtoperator.DefaultConfig()
	cfg.ImagePrefix, cfg.ImageTag, cfg.OperatorVersion = "d8v.local/", "dev", "test"
	return cfg
}

// startOperator runs virt-operator's controller through the fixture's rewriter sidecar until the
// test ends, with the caches and client it runs with in production.
func startOperator(t *testing.T, fx *fixture) {
	t.Helper()
	mgr, err := ctrl.NewManager(fx.sidecar, ctrl.Options{
		Scheme:  scheme(),
		Cache:   virtoperator.CacheOptions(),
		Client:  virtoperator.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// -count=N runs the test again in the same process.
		Controller: config.Controller{SkipNameValidation: ptrTo(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := virtoperator.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), operatorConfig(), clock.RealClock{})
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// readyNode registers a Node that looks healthy to the scheduler and the node controller (a
// Ready condition, room for pods, a renewed Lease), so that the operator's pods get bound to it
// and the DaemonSet wants one pod. No kubelet runs them: the test writes their status. Its
// cleanup also force-deletes the namespace's pods, which no kubelet would ever finish deleting.
func readyNode(t *testing.T, fx *fixture, name, ns string) {
	t.Helper()
	ctx := testenv.Context(t)
	kube := fx.env.Kube
	if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{corev1.LabelOSStable: "linux", corev1.LabelHostname: name},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	beatCtx, stopBeat := context.WithCancel(context.Background())
	beaten := make(chan struct{})
	t.Cleanup(func() {
		stopBeat()
		<-beaten
		bg := context.Background()
		_ = kube.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}, metav1.ListOptions{})
		_ = kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(bg, name, metav1.DeleteOptions{})
		_ = kube.CoreV1().Nodes().Delete(bg, name, metav1.DeleteOptions{})
	})
	room := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	// The controllers watching nodes write to a new one at once.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		stamp := metav1.Now()
		node.Status = corev1.NodeStatus{
			Capacity: room, Allocatable: room,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: stamp, LastTransitionTime: stamp}},
		}
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		close(beaten)
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptrTo(name), LeaseDurationSeconds: ptrTo(int32(40))},
	}
	go func() {
		// The node lifecycle controller marks a node whose lease goes stale unreachable, and its
		// pods not ready: keep it renewed.
		defer close(beaten)
		leases := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		for {
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if cur, err := leases.Get(beatCtx, name, metav1.GetOptions{}); err == nil {
				lease.ResourceVersion = cur.ResourceVersion
				_, _ = leases.Update(beatCtx, lease, metav1.UpdateOptions{})
			} else if apierrors.IsNotFound(err) {
				fresh := lease.DeepCopy()
				fresh.ResourceVersion = ""
				_, _ = leases.Create(beatCtx, fresh, metav1.CreateOptions{})
			}
			select {
			case <-beatCtx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
}

// markPodsReady plays the kubelet: every pod of ns bound to a node runs and is ready.
func markPodsReady(ctx context.Context, fx *fixture, ns string) error {
	pods, err := fx.env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodRunning {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.Conditions = nil
		for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		if _, err := fx.env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func kvCondition(kv *kubevirtv1.KubeVirt, t kubevirtv1.KubeVirtConditionType) *kubevirtv1.KubeVirtCondition {
	for i := range kv.Status.Conditions {
		if kv.Status.Conditions[i].Type == t {
			return &kv.Status.Conditions[i]
		}
	}
	return nil
}

// kvState waits for the KubeVirt's phase and one condition.
func kvState(fx *fixture, key client.ObjectKey, phase kubevirtv1.KubeVirtPhase, ct kubevirtv1.KubeVirtConditionType, status corev1.ConditionStatus, out *kubevirtv1.KubeVirt) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := fx.client.Get(ctx, key, out); err != nil {
			return err
		}
		c := kvCondition(out, ct)
		if out.Status.Phase != phase || c == nil || c.Status != status {
			return fmt.Errorf("phase %q, conditions %+v; want %s with %s=%s", out.Status.Phase, out.Status.Conditions, phase, ct, status)
		}
		return nil
	}
}

func TestOperatorInstallsAndRemovesTheCore(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	startOperator(t, fx)
	readyNode(t, fx, "op-"+ns, ns)

	one := uint8(1)
	kv := &kubevirtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"},
		Spec: kubevirtv1.KubeVirtSpec{
			Infra: &kubevirtv1.ComponentConfig{Replicas: &one},
			CustomizeComponents: kubevirtv1.CustomizeComponents{Patches: []kubevirtv1.CustomizeComponentsPatch{{
				ResourceType: "Deployment", ResourceName: virtoperator.APIName, Type: kubevirtv1.StrategicMergePatchType,
				Patch: `{"metadata":{"annotations":{"example.com/customized":"yes"}}}`,
			}}},
		},
	}
	if err := fx.client.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	t.Cleanup(func() {
		// Should the test stop early: the operator (still running) removes the cluster objects.
		bg := context.Background()
		if err := fx.client.Delete(bg, kv); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete KubeVirt: %v", err)
			return
		}
		_ = waitGone(bg, fx, kv)
	})

	// Every object the builders make exists, in the KubeVirt's namespace or cluster-wide.
	built := virtoperator.Objects(kv, operatorConfig(), virtoperator.Certs{})
	eventually(t, "operator objects", func(ctx context.Context) error {
		for _, o := range built {
			if err := fx.client.Get(ctx, client.ObjectKeyFromObject(o), empty(o)); err != nil {
				return fmt.Errorf("%s: %w", describe(o), err)
			}
		}
		return nil
	})

	var got kubevirtv1.KubeVirt
	eventually(t, "KubeVirt deploying", kvState(fx, key, kubevirtv1.KubeVirtPhaseDeploying, kubevirtv1.KubeVirtConditionProgressing, corev1.ConditionTrue, &got))
	if got.Status.TargetKubeVirtVersion != "dev" || got.Status.TargetKubeVirtRegistry != "d8v.local" || got.Status.OperatorVersion != "test" ||
		got.Status.TargetDeploymentID == "" || !slices.Contains(got.Finalizers, virtoperator.Finalizer) {
		t.Errorf("status %+v finalizers %v", got.Status, got.Finalizers)
	}
	if c := kvCondition(&got, kubevirtv1.KubeVirtConditionAvailable); c == nil || c.Status != corev1.ConditionFalse || c.Reason != virtoperator.ReasonDeploying {
		t.Errorf("Available while deploying: %+v", c)
	}

	t.Run("shape", func(t *testing.T) { checkShape(t, fx, ns) })
	t.Run("customized", func(t *testing.T) {
		var api appsv1.Deployment
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: virtoperator.APIName}, &api); err != nil {
			t.Fatal(err)
		}
		if api.Annotations["example.com/customized"] != "yes" {
			t.Errorf("virt-api annotations %v: spec.customizeComponents not applied", api.Annotations)
		}
	})
	t.Run("stored renamed", func(t *testing.T) { checkStoredRenamed(t, fx, ns) })
	t.Run("rbac works", func(t *testing.T) { checkRBAC(t, fx, ns) })
	t.Run("metrics through kube-rbac-proxy", func(t *testing.T) { checkMetricsProxy(t, fx, ns) })
	t.Run("a second KubeVirt is not honoured", func(t *testing.T) { checkSecondKubeVirt(t, fx) })

	// The kubelet's part: the pods the controllers made run. The Deployments and the DaemonSet
	// become available, and so does the KubeVirt.
	eventually(t, "KubeVirt deployed", func(ctx context.Context) error {
		if err := markPodsReady(ctx, fx, ns); err != nil {
			return err
		}
		return kvState(fx, key, kubevirtv1.KubeVirtPhaseDeployed, kubevirtv1.KubeVirtConditionAvailable, corev1.ConditionTrue, &got)(ctx)
	})
	if got.Status.ObservedKubeVirtVersion != "dev" || got.Status.ObservedDeploymentID != got.Status.TargetDeploymentID ||
		got.Status.ObservedGeneration == nil || *got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observed %+v", got.Status)
	}
	for _, ct := range []kubevirtv1.KubeVirtConditionType{kubevirtv1.KubeVirtConditionProgressing, kubevirtv1.KubeVirtConditionDegraded} {
		if c := kvCondition(&got, ct); c == nil || c.Status != corev1.ConditionFalse {
			t.Errorf("%s once deployed: %+v", ct, c)
		}
	}

	// Deleting: the phase says so, everything goes, then the finalizer and the KubeVirt.
	w, err := fx.client.Watch(ctx, &kubevirtv1.KubeVirtList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := fx.client.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	phases := watchPhases(t, w)
	if !slices.Contains(phases, kubevirtv1.KubeVirtPhaseDeleting) {
		t.Errorf("phases seen while deleting: %v", phases)
	}
	for _, o := range built {
		err := fx.client.Get(ctx, client.ObjectKeyFromObject(o), empty(o))
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after the KubeVirt went: %v", describe(o), err)
		}
	}
}

// watchPhases collects the phases of the watched KubeVirt until it is deleted.
func watchPhases(t *testing.T, w watch.Interface) []kubevirtv1.KubeVirtPhase {
	t.Helper()
	var phases []kubevirtv1.KubeVirtPhase
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended; phases so far %v", phases)
			}
			if kv, isKV := ev.Object.(*kubevirtv1.KubeVirt); isKV {
				if len(phases) == 0 || phases[len(phases)-1] != kv.Status.Phase {
					phases = append(phases, kv.Status.Phase)
				}
				if ev.Type == watch.Deleted {
					return phases
				}
			}
		case <-timeout:
			t.Fatalf("KubeVirt not deleted; phases so far %v", phases)
		}
	}
}

func waitGone(ctx context.Context, fx *fixture, o client.Object) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		err := fx.client.Get(ctx, client.ObjectKeyFromObject(o), empty(o))
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
