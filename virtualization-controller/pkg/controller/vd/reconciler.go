package vd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

// EventSource is the controller's name in the events it records.
const EventSource = "virtualdisk-controller"

// Config is what the reconciler needs besides its clients.
type Config struct {
	Pods PodConfig
	// DVCRExporter serves an image in DVCR to a disk's importer from the module's namespace.
	DVCRExporter importerpod.DVCRExporter
	// Interval is how often a running import's progress is read, and how often a disk that
	// waits (for its source, or for its users to go) looks again.
	Interval time.Duration
	// NewToken makes an Upload source's token (importerpod.AnnotationUploadToken).
	NewToken func() (string, error)
}

// Reconciler carries out Decide, one step per reconcile, reading the disk, its claim and its
// importer Pod afresh each time.
type Reconciler struct {
	client client.Client
	// apiReader reads what the cache does not hold (Secrets, the Pods using a claim) and
	// confirms a claim the cache does not have yet.
	apiReader client.Reader
	cfg       Config
	progress  importerpod.Scraper
	clock     clock.PassiveClock
	recorder  events.EventRecorder
}

// NewReconciler wires a Reconciler.
func NewReconciler(c client.Client, apiReader client.Reader, cfg Config, progress importerpod.Scraper, clk clock.PassiveClock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, cfg: cfg, progress: progress, clock: clk, recorder: recorder}
}

// SetupWithManager watches VirtualDisks and the claims and importer Pods they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha2.VirtualDisk{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&corev1.Pod{}).
		Named("virtualdisk").
		Complete(r)
}

// Reconcile does the next step for one VirtualDisk.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vd := &v1alpha2.VirtualDisk{}
	if err := r.client.Get(ctx, req.NamespacedName, vd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pvc, err := r.claim(ctx, vd)
	if err != nil {
		return ctrl.Result{}, err
	}
	pod, err := r.pod(ctx, vd.Namespace, ImporterName(vd))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get importer pod: %w", err)
	}
	inspector, err := r.pod(ctx, vd.Namespace, InspectorName(vd))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get inspector pod: %w", err)
	}
	var users []string
	if vd.DeletionTimestamp != nil {
		if users, err = r.users(ctx, vd); err != nil {
			return ctrl.Result{}, err
		}
	}
	step := Decide(State{VD: vd, PVC: pvc, Pod: pod, Inspector: inspector, InUse: len(users) > 0})
	log.FromContext(ctx).V(1).Info("reconcile", "step", step.String(), "phase", vd.Status.Phase)
	switch step {
	case StepAddFinalizer:
		patch := client.MergeFrom(vd.DeepCopy())
		controllerutil.AddFinalizer(vd, Finalizer)
		return ctrl.Result{}, wrap("add finalizer", r.client.Patch(ctx, vd, patch))
	case StepWaitUnused:
		return ctrl.Result{RequeueAfter: r.cfg.Interval}, r.setStatus(ctx, vd, TerminatingStatus(vd, users, r.now()))
	case StepCleanup:
		if err := r.deleteImporter(ctx, vd, pod); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.deletePod(ctx, inspector); err != nil {
			return ctrl.Result{}, err
		}
		if pvc != nil {
			if err := r.deleteClaim(ctx, pvc); err != nil {
				return ctrl.Result{}, err
			}
		}
		patch := client.MergeFrom(vd.DeepCopy())
		controllerutil.RemoveFinalizer(vd, Finalizer)
		return ctrl.Result{}, wrap("remove finalizer", r.client.Patch(ctx, vd, patch))
	case StepProvision:
		return r.provision(ctx, vd)
	case StepDeleteImporter:
		return ctrl.Result{}, r.deleteImporter(ctx, vd, pod)
	case StepDeleteClaim:
		return ctrl.Result{}, r.deleteClaim(ctx, pvc)
	case StepCreatePod:
		return r.createPod(ctx, vd, pvc)
	case StepWatchProgress:
		p := importerpod.ReadProgress(ctx, r.progress, pod)
		s := ProvisioningStatus(vd, pvc.Name, storageClassOf(pvc), p, r.now())
		if pod.Labels[labelUploader] == "true" {
			if s, err = r.uploadStatus(ctx, vd, pvc.Name, storageClassOf(pvc), pod, p); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: r.cfg.Interval}, r.setStatus(ctx, vd, s)
	case StepRecordResult:
		return ctrl.Result{}, r.recordResult(ctx, vd, pvc, pod)
	case StepLost:
		return ctrl.Result{}, r.setStatus(ctx, vd, LostStatus(vd, r.now()))
	case StepWatchInspection:
		p := importerpod.ReadProgress(ctx, r.progress, inspector)
		if !IsStager(inspector) {
			return ctrl.Result{RequeueAfter: r.cfg.Interval}, r.setStatus(ctx, vd, InspectingStatus(vd, vd.Status.StorageClassName, p, r.now()))
		}
		if p != nil && p.Staged != nil {
			return ctrl.Result{}, r.recordStaged(ctx, vd, inspector, *p.Staged)
		}
		s, err := r.uploadStatus(ctx, vd, "", vd.Status.StorageClassName, inspector, p)
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.cfg.Interval}, r.setStatus(ctx, vd, s)
	case StepRecordSize:
		return ctrl.Result{}, r.recordSize(ctx, vd, inspector)
	case StepDeleteInspector:
		return ctrl.Result{}, r.deletePod(ctx, inspector)
	case StepObserve:
		return ctrl.Result{}, r.observe(ctx, vd, pvc)
	}
	return ctrl.Result{}, nil
}

// uploadStatus is the status of a disk whose uploader (the importer of claim, or a stager: claim
// "") runs: starting, then waiting for the upload at its URLs once it is ready, then the
// upload's progress once it has begun.
func (r *Reconciler) uploadStatus(ctx context.Context, vd *v1alpha2.VirtualDisk, claim, class string, uploader *corev1.Pod, p *importerprogress.Progress) (v1alpha2.VirtualDiskStatus, error) {
	if !importerpod.UploadNotBegun(p, vd.Status.Phase != v1alpha2.DiskProvisioning) {
		return ProvisioningStatus(vd, claim, class, p, r.now()), nil
	}
	if !importerpod.Ready(uploader) {
		return UploaderStartingStatus(vd, claim, class, r.now()), nil
	}
	svc, err := r.uploaderService(ctx, vd)
	if err != nil {
		return v1alpha2.VirtualDiskStatus{}, err
	}
	return WaitForUploadStatus(vd, claim, class, UploadURLs(vd, svc, uploader), r.now()), nil
}

// uploaderService is the disk's uploader Service, read past the cache (Services are not cached);
// nil when it is not there.
func (r *Reconciler) uploaderService(ctx context.Context, vd *v1alpha2.VirtualDisk) (*corev1.Service, error) {
	svc := &corev1.Service{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: vd.Namespace, Name: UploaderName(vd)}, svc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get uploader service: %w", err)
	}
	return svc, nil
}

// pod is the Pod name of namespace, nil when there is none.
func (r *Reconciler) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pod, err
}

// claim is the disk's claim, nil when there is none; one the cache lacks is looked for in the
// apiserver, so a claim just created is not taken for a lost one.
func (r *Reconciler) claim(ctx context.Context, vd *v1alpha2.VirtualDisk) (*corev1.PersistentVolumeClaim, error) {
	key := types.NamespacedName{Namespace: vd.Namespace, Name: ClaimName(vd)}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.client.Get(ctx, key, pvc)
	if apierrors.IsNotFound(err) {
		err = r.apiReader.Get(ctx, key, pvc)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get claim: %w", err)
	}
	return pvc, nil
}

// users are what uses the disk: the virtual machines in its status, the running Pods of its
// namespace (a virtual machine's launcher Pod, a hotplug attachment Pod) that mount its claim,
// and the attachments that plug it in.
func (r *Reconciler) users(ctx context.Context, vd *v1alpha2.VirtualDisk) ([]string, error) {
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(vd.Namespace)); err != nil {
		return nil, fmt.Errorf("list pods using the disk: %w", err)
	}
	var attachments v1alpha2.VirtualMachineBlockDeviceAttachmentList
	if err := r.client.List(ctx, &attachments, client.InNamespace(vd.Namespace)); err != nil {
		return nil, fmt.Errorf("list attachments of the disk: %w", err)
	}
	return Consumers(vd, ClaimName(vd), pods.Items, attachments.Items), nil
}

// deps gathers what vd's plan depends on.
func (r *Reconciler) deps(ctx context.Context, vd *v1alpha2.VirtualDisk) (Deps, error) {
	var d Deps
	var classes storagev1.StorageClassList
	if err := r.client.List(ctx, &classes); err != nil {
		return d, fmt.Errorf("list storage classes: %w", err)
	}
	d.StorageClasses = classes.Items
	ds := vd.Spec.DataSource
	switch {
	case ds == nil:
	case ds.Type == v1alpha2.DataSourceTypeContainerImage && ds.ContainerImage.ImagePullSecret != nil:
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: vd.Namespace, Name: ds.ContainerImage.ImagePullSecret.Name}, &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			return d, fmt.Errorf("get image pull secret: %w", err)
		}
		d.PullSecretFound = err == nil
	case ds.Type == v1alpha2.DataSourceTypeObjectRef && ds.ObjectRef.Kind == v1alpha2.VirtualDiskKind:
		disk, err := r.sourceDisk(ctx, types.NamespacedName{Namespace: vd.Namespace, Name: ds.ObjectRef.Name})
		if err != nil {
			return d, err
		}
		d.Disk = disk
	case ds.Type == v1alpha2.DataSourceTypeObjectRef && ds.ObjectRef.Kind == v1alpha2.ClusterVirtualImageKind:
		cvi := &v1alpha2.ClusterVirtualImage{}
		if err := r.client.Get(ctx, types.NamespacedName{Name: ds.ObjectRef.Name}, cvi); err == nil {
			d.Image = imageOf(cvi.UID, cvi.Status.ImageStatus, cvi.Status.Target.RegistryURL)
		} else if !apierrors.IsNotFound(err) {
			return d, fmt.Errorf("get cluster virtual image: %w", err)
		}
	case ds.Type == v1alpha2.DataSourceTypeObjectRef:
		vi := &v1alpha2.VirtualImage{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: vd.Namespace, Name: ds.ObjectRef.Name}, vi); err == nil {
			d.Image = imageOf(vi.UID, vi.Status.ImageStatus, vi.Status.Target.RegistryURL)
			if name := vi.Status.Target.PersistentVolumeClaimName; name != "" && vi.Status.Target.RegistryURL == "" {
				pvc := &corev1.PersistentVolumeClaim{}
				if err := r.client.Get(ctx, types.NamespacedName{Namespace: vd.Namespace, Name: name}, pvc); err != nil {
					return d, fmt.Errorf("get the image's claim: %w", err)
				}
				d.Image.Claim = name
				d.Image.Block = pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
			}
		} else if !apierrors.IsNotFound(err) {
			return d, fmt.Errorf("get virtual image: %w", err)
		}
	}
	return d, nil
}

// sourceDisk is the VirtualDisk key as a copy's source: its claim (from the cache, which holds
// the disks' claims), its size and the machines that have it mounted; nil when it does not exist.
func (r *Reconciler) sourceDisk(ctx context.Context, key types.NamespacedName) (*SourceDisk, error) {
	src := &v1alpha2.VirtualDisk{}
	if err := r.client.Get(ctx, key, src); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("get source virtual disk: %w", err)
	}
	d := &SourceDisk{UID: src.UID, Phase: src.Status.Phase}
	for _, vm := range src.Status.AttachedToVirtualMachines {
		if vm.Mounted {
			d.RunningVMs = append(d.RunningVMs, vm.Name)
		}
	}
	pvc := &corev1.PersistentVolumeClaim{}
	name := src.Status.Target.PersistentVolumeClaimName
	if name == "" {
		return d, nil
	}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, pvc); apierrors.IsNotFound(err) {
		return d, nil
	} else if err != nil {
		return nil, fmt.Errorf("get source claim: %w", err)
	}
	d.Claim = name
	d.Block = pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
	// A disk is its claim's request (grown with it; its disk.img may grow only at the next start).
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	d.SizeBytes = size.Value()
	return d, nil
}

func imageOf(uid types.UID, s v1alpha2.ImageStatus, registryURL string) *Image {
	img := &Image{UID: uid, Phase: s.Phase, RegistryURL: registryURL, CDROM: s.CDROM}
	if q, err := resource.ParseQuantity(s.Size.UnpackedBytes); err == nil {
		img.UnpackedBytes = q.Value()
	}
	return img
}

// provision plans a disk without a claim, and creates the claim and its importer.
func (r *Reconciler) provision(ctx context.Context, vd *v1alpha2.VirtualDisk) (ctrl.Result, error) {
	deps, err := r.deps(ctx, vd)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan, problem := MakePlan(vd, deps)
	if problem != nil {
		return r.problem(ctx, vd, problem)
	}
	if plan.Source != nil && plan.Source.Upload && vd.Annotations[importerpod.AnnotationUploadToken] == "" {
		return ctrl.Result{}, r.addUploadToken(ctx, vd)
	}
	if plan.Inspect {
		return ctrl.Result{}, r.startInspection(ctx, vd, plan)
	}
	pvc := Claim(vd, plan)
	if err := r.client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		r.recorder.Eventf(vd, nil, corev1.EventTypeWarning, "FailedCreate", "Provision", "Error creating PersistentVolumeClaim %s: %v", pvc.Name, err)
		return ctrl.Result{}, fmt.Errorf("create claim: %w", err)
	}
	log.FromContext(ctx).Info("claim created", "claim", pvc.Name, "storageClass", plan.StorageClass, "size", plan.Size.String(), "volumeMode", plan.VolumeMode)
	if plan.Source == nil {
		return ctrl.Result{}, r.setStatus(ctx, vd, ClaimStatus(vd, pvc, plan.WaitForFirstConsumer, r.now()))
	}
	return r.startImport(ctx, vd, pvc.Name, plan)
}

// problem records why the disk cannot be provisioned; a Pending one is looked at again.
func (r *Reconciler) problem(ctx context.Context, vd *v1alpha2.VirtualDisk, p *Problem) (ctrl.Result, error) {
	if err := r.setStatus(ctx, vd, ProblemStatus(vd, p, r.now())); err != nil {
		return ctrl.Result{}, err
	}
	if p.Phase == v1alpha2.DiskPending {
		return ctrl.Result{RequeueAfter: r.cfg.Interval}, nil
	}
	return ctrl.Result{}, nil
}

// createPod starts the importer for a claim that waits to be filled: the plan again, with the
// claim's own volume mode and size.
func (r *Reconciler) createPod(ctx context.Context, vd *v1alpha2.VirtualDisk, pvc *corev1.PersistentVolumeClaim) (ctrl.Result, error) {
	deps, err := r.deps(ctx, vd)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan, problem := MakePlan(vd, deps)
	if problem != nil {
		return r.problem(ctx, vd, problem)
	}
	if pvc.Spec.VolumeMode != nil {
		plan.VolumeMode = *pvc.Spec.VolumeMode
	}
	if q, err := resource.ParseQuantity(pvc.Annotations[AnnotationDiskSize]); err == nil {
		plan.Size = q
	}
	return r.startImport(ctx, vd, pvc.Name, plan)
}

// startInspection creates the importer's Secret (when it needs one) and the inspector Pod,
// which learns the size of a disk that has none.
func (r *Reconciler) startInspection(ctx context.Context, vd *v1alpha2.VirtualDisk, plan Plan) error {
	secret, err := r.putImporterSecret(ctx, vd, plan.Source)
	if err != nil {
		return err
	}
	pod := r.cfg.Pods.InspectorPod(vd, plan.Source, secret)
	if err := r.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		r.recorder.Eventf(vd, nil, corev1.EventTypeWarning, "FailedCreate", "Inspect", "Error creating inspector pod %s: %v", pod.Name, err)
		return fmt.Errorf("create inspector pod: %w", err)
	}
	log.FromContext(ctx).Info("inspector pod created", "pod", pod.Name)
	if plan.Source.Upload {
		if err := r.client.Create(ctx, r.cfg.Pods.UploaderService(vd)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create uploader service: %w", err)
		}
		return r.setStatus(ctx, vd, UploaderStartingStatus(vd, "", plan.StorageClass, r.now()))
	}
	return r.setStatus(ctx, vd, InspectingStatus(vd, plan.StorageClass, nil, r.now()))
}

// recordSize takes the ended inspector's result: the source's unpacked size becomes the disk's
// (AnnotationSourceSize), and the import follows; an ISO or a failure fails the disk.
func (r *Reconciler) recordSize(ctx context.Context, vd *v1alpha2.VirtualDisk, inspector *corev1.Pod) error {
	res := importerresult.Of(inspector)
	if res.Reason == contract.ReasonCompleted && !res.CDROM && res.UnpackedSize > 0 {
		patch := client.MergeFrom(vd.DeepCopy())
		metav1.SetMetaDataAnnotation(&vd.ObjectMeta, AnnotationSourceSize, strconv.FormatInt(res.UnpackedSize, 10))
		if err := r.client.Patch(ctx, vd, patch); err != nil {
			return fmt.Errorf("record the source's size: %w", err)
		}
		log.FromContext(ctx).Info("source inspected", "format", res.Format, "unpackedSize", res.UnpackedSize)
		return r.deletePod(ctx, inspector)
	}
	if err := r.setStatus(ctx, vd, FailedStatus(vd, res, r.now())); err != nil {
		return err
	}
	if err := r.deletePod(ctx, inspector); err != nil {
		return err
	}
	return r.deleteImporter(ctx, vd, nil)
}

// recordStaged takes what the stager staged: its unpacked size becomes the disk's
// (AnnotationSourceSize), and the claim's import from the stager follows; an ISO fails the disk.
func (r *Reconciler) recordStaged(ctx context.Context, vd *v1alpha2.VirtualDisk, stager *corev1.Pod, staged importerprogress.Staged) error {
	if staged.CDROM || staged.UnpackedBytes <= 0 {
		res := contract.Result{Reason: contract.ReasonCompleted, Format: staged.Format, CDROM: staged.CDROM, UnpackedSize: staged.UnpackedBytes}
		if !staged.CDROM {
			res = contract.Result{Reason: contract.ReasonNotDiskImage, Message: "the upload holds an empty disk"}
		}
		if err := r.setStatus(ctx, vd, FailedStatus(vd, res, r.now())); err != nil {
			return err
		}
		if err := r.deletePod(ctx, stager); err != nil {
			return err
		}
		return r.deleteImporter(ctx, vd, nil)
	}
	patch := client.MergeFrom(vd.DeepCopy())
	metav1.SetMetaDataAnnotation(&vd.ObjectMeta, AnnotationSourceSize, strconv.FormatInt(staged.UnpackedBytes, 10))
	if err := r.client.Patch(ctx, vd, patch); err != nil {
		return fmt.Errorf("record the upload's size: %w", err)
	}
	log.FromContext(ctx).Info("upload staged", "format", staged.Format, "unpackedSize", staged.UnpackedBytes)
	return nil
}

// putImporterSecret creates the importer's Secret when src needs one, and returns it (nil when
// not).
func (r *Reconciler) putImporterSecret(ctx context.Context, vd *v1alpha2.VirtualDisk, src *Source) (*corev1.Secret, error) {
	secret := ImporterSecret(vd, src)
	if secret != nil {
		if err := r.client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create importer secret: %w", err)
		}
	}
	return secret, nil
}

// startImport creates the importer's Secret (when it needs one) and Pod. An image in DVCR is
// read through a DVCR exporter, started first; the disk looks again until it serves.
func (r *Reconciler) startImport(ctx context.Context, vd *v1alpha2.VirtualDisk, claim string, plan Plan) (ctrl.Result, error) {
	if plan.Source.Upload && vd.Annotations[AnnotationSourceSize] != "" {
		// Staged: the claim's importer reads the stager's export, with the upload's token.
		stager, err := r.pod(ctx, vd.Namespace, InspectorName(vd))
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("get stager pod: %w", err)
		}
		if stager == nil || !IsStager(stager) || importerresult.Done(stager) || stager.Status.PodIP == "" {
			return ctrl.Result{}, r.setStatus(ctx, vd, FailedStatus(vd, contract.Result{Reason: contract.ReasonSourceNotFound,
				Message: "the staged upload is gone before the disk's claim was filled from it: delete the disk and upload again"}, r.now()))
		}
		plan.Source = &Source{URL: StagedExportURL(stager), ExportToken: []byte(vd.Annotations[importerpod.AnnotationUploadToken])}
	}
	if plan.Source.DVCR {
		exp, ok, err := r.cfg.DVCRExporter.Ensure(ctx, ExporterName(vd), importerpod.ExportFor{Labels: labels(vd), UIDLabel: LabelVDUID}, plan.Source.Image)
		if failed := (*importerpod.FailedError)(nil); errors.As(err, &failed) {
			return ctrl.Result{}, r.setStatus(ctx, vd, FailedStatus(vd, failed.Result, r.now()))
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if !ok {
			return ctrl.Result{RequeueAfter: time.Second}, r.setStatus(ctx, vd, r.provisioningStatus(vd, claim, plan))
		}
		plan.Source = &Source{URL: exp.URL, ExportToken: exp.Token}
	}
	return ctrl.Result{}, r.createImporter(ctx, vd, claim, plan)
}

// createImporter creates the importer's Secret (when it needs one) and Pod.
func (r *Reconciler) createImporter(ctx context.Context, vd *v1alpha2.VirtualDisk, claim string, plan Plan) error {
	secret, err := r.putImporterSecret(ctx, vd, plan.Source)
	if err != nil {
		return err
	}
	pod := r.cfg.Pods.ImporterPod(vd, claim, plan, secret)
	if err := r.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		r.recorder.Eventf(vd, nil, corev1.EventTypeWarning, "FailedCreate", "Import", "Error creating importer pod %s: %v", pod.Name, err)
		return fmt.Errorf("create importer pod: %w", err)
	}
	log.FromContext(ctx).Info("importer pod created", "pod", pod.Name, "claim", claim)
	if plan.Source.Upload {
		if err := r.client.Create(ctx, r.cfg.Pods.UploaderService(vd)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create uploader service: %w", err)
		}
		return r.setStatus(ctx, vd, UploaderStartingStatus(vd, claim, plan.StorageClass, r.now()))
	}
	return r.setStatus(ctx, vd, r.provisioningStatus(vd, claim, plan))
}

// provisioningStatus is Provisioning into claim from plan's source, before any progress.
func (r *Reconciler) provisioningStatus(vd *v1alpha2.VirtualDisk, claim string, plan Plan) v1alpha2.VirtualDiskStatus {
	s := ProvisioningStatus(vd, claim, plan.StorageClass, nil, r.now())
	if plan.SourceUID != "" {
		s.SourceUID = &plan.SourceUID
	}
	return s
}

// addUploadToken gives a disk with an Upload source the token its uploader will take.
func (r *Reconciler) addUploadToken(ctx context.Context, vd *v1alpha2.VirtualDisk) error {
	token, err := r.cfg.NewToken()
	if err != nil {
		return fmt.Errorf("upload token: %w", err)
	}
	patch := client.MergeFrom(vd.DeepCopy())
	metav1.SetMetaDataAnnotation(&vd.ObjectMeta, importerpod.AnnotationUploadToken, token)
	return wrap("add upload token", r.client.Patch(ctx, vd, patch))
}

func isUpload(vd *v1alpha2.VirtualDisk) bool {
	return vd.Spec.DataSource != nil && vd.Spec.DataSource.Type == v1alpha2.DataSourceTypeUpload
}

// fromImage: the disk is made from an image, maybe one in DVCR, read through a DVCR exporter.
func fromImage(vd *v1alpha2.VirtualDisk) bool {
	ds := vd.Spec.DataSource
	return ds != nil && ds.Type == v1alpha2.DataSourceTypeObjectRef && ds.ObjectRef != nil &&
		(ds.ObjectRef.Kind == v1alpha2.ClusterVirtualImageKind || ds.ObjectRef.Kind == v1alpha2.VirtualImageKind)
}

// recordResult takes the ended importer's result: a disk marks its claim provisioned; anything
// else fails the disk and removes the half-written claim.
func (r *Reconciler) recordResult(ctx context.Context, vd *v1alpha2.VirtualDisk, pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod) error {
	res := importerresult.Of(pod)
	if res.Reason == contract.ReasonCompleted && !res.CDROM {
		patch := client.MergeFrom(pvc.DeepCopy())
		metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, AnnotationProvisioned, "true")
		if err := r.client.Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("mark claim provisioned: %w", err)
		}
		log.FromContext(ctx).Info("import completed", "claim", pvc.Name, "format", res.Format, "unpackedSize", res.UnpackedSize)
		if err := r.setStatus(ctx, vd, ClaimStatus(vd, pvc, false, r.now())); err != nil {
			return err
		}
		return r.deleteImporter(ctx, vd, pod)
	}
	if err := r.setStatus(ctx, vd, FailedStatus(vd, res, r.now())); err != nil {
		return err
	}
	if err := r.deleteImporter(ctx, vd, pod); err != nil {
		return err
	}
	return r.deleteClaim(ctx, pvc)
}

// observe grows the claim when the spec asks for more, and reports it.
func (r *Reconciler) observe(ctx context.Context, vd *v1alpha2.VirtualDisk, pvc *corev1.PersistentVolumeClaim) error {
	if want := ResizeTo(vd, pvc); want != nil {
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *want
		if err := r.client.Patch(ctx, pvc, patch); err != nil {
			r.recorder.Eventf(vd, nil, corev1.EventTypeWarning, "FailedResize", "Resize", "Error growing PersistentVolumeClaim %s to %s: %v", pvc.Name, want.String(), err)
			return fmt.Errorf("grow claim: %w", err)
		}
		log.FromContext(ctx).Info("claim grows", "claim", pvc.Name, "request", want.String())
	}
	wffc := false
	if pvc.Status.Phase != corev1.ClaimBound && pvc.Spec.StorageClassName != nil {
		sc := &storagev1.StorageClass{}
		if err := r.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("get storage class: %w", err)
		}
		wffc = sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	}
	return r.setStatus(ctx, vd, ClaimStatus(vd, pvc, wffc, r.now()))
}

// deletePod deletes an importer or inspector Pod, if any, as it was read.
func (r *Reconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if pod == nil {
		return nil
	}
	err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	log.FromContext(ctx).Info("pod deleted", "pod", pod.Name)
	return nil
}

// deleteImporter deletes the importer Pod (if any), its Secret, its uploader Service and its DVCR
// exporter (if any).
func (r *Reconciler) deleteImporter(ctx context.Context, vd *v1alpha2.VirtualDisk, pod *corev1.Pod) error {
	if err := r.deletePod(ctx, pod); err != nil {
		return err
	}
	if fromImage(vd) {
		if err := r.cfg.DVCRExporter.Delete(ctx, ExporterName(vd)); err != nil {
			return err
		}
	}
	companions := []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: vd.Namespace, Name: ImporterName(vd)}}}
	if isUpload(vd) {
		companions = append(companions, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: vd.Namespace, Name: UploaderName(vd)}})
	}
	for _, o := range companions {
		if err := r.client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete importer %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func (r *Reconciler) deleteClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	err := r.client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete claim: %w", err)
	}
	log.FromContext(ctx).Info("claim deleted", "claim", pvc.Name)
	return nil
}

// setStatus writes status when it differs, with an Event when the phase changes (a Warning for
// Failed and PVCLost).
func (r *Reconciler) setStatus(ctx context.Context, vd *v1alpha2.VirtualDisk, s v1alpha2.VirtualDiskStatus) error {
	if equality.Semantic.DeepEqual(vd.Status, s) {
		return nil
	}
	old := vd.Status.Phase
	patch := client.MergeFrom(vd.DeepCopy())
	vd.Status = s
	if err := r.client.Status().Patch(ctx, vd, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if old == s.Phase {
		return nil
	}
	note := fmt.Sprintf("Phase %s", s.Phase)
	if msg := phaseMessage(s); msg != "" {
		note += ": " + msg
	}
	kind := corev1.EventTypeNormal
	if s.Phase == v1alpha2.DiskFailed || s.Phase == v1alpha2.DiskLost {
		kind = corev1.EventTypeWarning
	}
	r.recorder.Eventf(vd, nil, kind, string(s.Phase), "Provision", "%s", note)
	log.FromContext(ctx).Info("phase changed", "from", old, "to", s.Phase, "disk", vd.Name)
	return nil
}

// phaseMessage is what the status says about its phase: the messages of Ready (set while it
// is not Ready), Resizing and Terminating (set while they hold).
func phaseMessage(s v1alpha2.VirtualDiskStatus) string {
	var msgs []string
	for _, t := range []vdcondition.Type{vdcondition.ReadyType, vdcondition.ResizingType, vdcondition.TerminatingType} {
		if c := meta.FindStatusCondition(s.Conditions, string(t)); c != nil && c.Message != "" {
			msgs = append(msgs, c.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

func storageClassOf(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName == nil {
		return ""
	}
	return *pvc.Spec.StorageClassName
}

func (r *Reconciler) now() metav1.Time { return metav1.NewTime(r.clock.Now().Truncate(time.Second)) }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
