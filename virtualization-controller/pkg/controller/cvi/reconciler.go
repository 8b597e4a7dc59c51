package cvi

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/cvicondition"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
)

// EventSource is the controller's name in the events it records.
const EventSource = "clustervirtualimage-controller"

// ProgressReader reads a running importer's progress from its metrics URL.
type ProgressReader interface {
	Scrape(ctx context.Context, url string) (importerprogress.Progress, error)
}

// ImageDeleter removes an image from DVCR; one that is not there is no error.
type ImageDeleter interface {
	Delete(ctx context.Context, ref string) error
}

// Reconciler carries out Decide, one step per reconcile. It is level-based: each reconcile
// reads the image and its importer Pod afresh.
type Reconciler struct {
	client client.Client
	// apiReader reads past the cache before an importer Pod is created, so a cache that lags
	// behind (a Pod just deleted, a status just written) never starts a second import.
	apiReader client.Reader
	pods      PodConfig
	progress  ProgressReader
	images    ImageDeleter
	clock     clock.PassiveClock
	recorder  events.EventRecorder
	// interval is how often a running import's progress is read.
	interval time.Duration
}

// NewReconciler wires a Reconciler.
func NewReconciler(c client.Client, apiReader client.Reader, pods PodConfig, progress ProgressReader, images ImageDeleter, clk clock.PassiveClock, recorder events.EventRecorder, interval time.Duration) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, pods: pods, progress: progress, images: images, clock: clk, recorder: recorder, interval: interval}
}

// SetupWithManager watches ClusterVirtualImages and the importer Pods they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha2.ClusterVirtualImage{}).
		Owns(&corev1.Pod{}).
		Named("clustervirtualimage").
		Complete(r)
}

// Reconcile does the next step for one ClusterVirtualImage.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cvi := &v1alpha2.ClusterVirtualImage{}
	if err := r.client.Get(ctx, req.NamespacedName, cvi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pod, err := r.importerPod(ctx, r.client, cvi.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	step := Decide(cvi, pod)
	log.FromContext(ctx).V(1).Info("reconcile", "step", step.String(), "phase", cvi.Status.Phase)
	switch step {
	case StepAddFinalizer:
		patch := client.MergeFrom(cvi.DeepCopy())
		controllerutil.AddFinalizer(cvi, Finalizer)
		return ctrl.Result{}, wrap("add finalizer", r.client.Patch(ctx, cvi, patch))
	case StepCleanup:
		if pod != nil {
			return ctrl.Result{}, r.deletePod(ctx, cvi, pod)
		}
		if InDVCR(cvi) {
			ref := r.pods.PushRef(cvi.Name)
			if err := r.images.Delete(ctx, ref); err != nil {
				r.recorder.Eventf(cvi, nil, corev1.EventTypeWarning, "FailedDeleteImage", "Delete", "Error deleting %s from DVCR: %v", ref, err)
				return ctrl.Result{}, fmt.Errorf("delete image from DVCR: %w", err)
			}
			log.FromContext(ctx).Info("image deleted from DVCR", "image", ref)
		}
		patch := client.MergeFrom(cvi.DeepCopy())
		controllerutil.RemoveFinalizer(cvi, Finalizer)
		return ctrl.Result{}, wrap("remove finalizer", r.client.Patch(ctx, cvi, patch))
	case StepDeletePod:
		return ctrl.Result{}, r.deletePod(ctx, cvi, pod)
	case StepUnsupportedSource:
		return ctrl.Result{}, r.setStatus(ctx, cvi, PendingStatus(cvi, unsupported(cvi.Spec.DataSource), r.now()))
	case StepCreatePod:
		return r.createPod(ctx, cvi)
	case StepWatchProgress:
		var p *importerprogress.Progress
		if pod.Status.PodIP != "" {
			got, err := r.progress.Scrape(ctx, MetricsURL(pod))
			if err != nil {
				log.FromContext(ctx).V(1).Info("importer progress not read", "pod", pod.Name, "error", err.Error())
			} else {
				p = &got
			}
		}
		return ctrl.Result{RequeueAfter: r.interval}, r.setStatus(ctx, cvi, ProvisioningStatus(cvi, p, r.now()))
	case StepRecordResult:
		if err := r.setStatus(ctx, cvi, ResultStatus(cvi, ResultOf(pod), r.pods.RegistryURL(cvi.Name), r.now())); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.deletePod(ctx, cvi, pod)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) importerPod(ctx context.Context, reader client.Reader, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: r.pods.Namespace, Name: PodName(name)}, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get importer pod: %w", err)
	}
	return pod, nil
}

// createPod starts the import after the apiserver (not the cache) confirms it is still due.
func (r *Reconciler) createPod(ctx context.Context, cached *v1alpha2.ClusterVirtualImage) (ctrl.Result, error) {
	cvi := &v1alpha2.ClusterVirtualImage{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(cached), cvi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pod, err := r.importerPod(ctx, r.apiReader, cvi.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if Decide(cvi, pod) != StepCreatePod {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	pod = r.pods.ImporterPod(cvi)
	if err := r.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		r.recorder.Eventf(cvi, nil, corev1.EventTypeWarning, "FailedCreate", "Import", "Error creating importer pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return ctrl.Result{}, fmt.Errorf("create importer pod: %w", err)
	}
	log.FromContext(ctx).Info("importer pod created", "pod", pod.Name, "url", cvi.Spec.DataSource.HTTP.URL)
	return ctrl.Result{}, r.setStatus(ctx, cvi, ProvisioningStatus(cvi, nil, r.now()))
}

func (r *Reconciler) deletePod(ctx context.Context, cvi *v1alpha2.ClusterVirtualImage, pod *corev1.Pod) error {
	err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete importer pod: %w", err)
	}
	log.FromContext(ctx).Info("importer pod deleted", "pod", pod.Name, "image", cvi.Name)
	return nil
}

// setStatus writes status when it differs, with an Event when the phase changes.
func (r *Reconciler) setStatus(ctx context.Context, cvi *v1alpha2.ClusterVirtualImage, s v1alpha2.ClusterVirtualImageStatus) error {
	if equality.Semantic.DeepEqual(cvi.Status, s) {
		return nil
	}
	old := cvi.Status.Phase
	patch := client.MergeFrom(cvi.DeepCopy())
	cvi.Status = s
	if err := r.client.Status().Patch(ctx, cvi, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if old == s.Phase {
		return nil
	}
	ready := meta.FindStatusCondition(s.Conditions, string(cvicondition.ReadyType))
	kind, note := corev1.EventTypeNormal, fmt.Sprintf("Phase %s", s.Phase)
	if ready != nil && ready.Message != "" {
		note += ": " + ready.Message
	}
	if s.Phase == v1alpha2.ImageFailed {
		kind = corev1.EventTypeWarning
	}
	r.recorder.Eventf(cvi, nil, kind, string(s.Phase), "Import", "%s", note)
	log.FromContext(ctx).Info("phase changed", "from", old, "to", s.Phase, "image", cvi.Name)
	return nil
}

func (r *Reconciler) now() metav1.Time { return metav1.NewTime(r.clock.Now().Truncate(time.Second)) }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
