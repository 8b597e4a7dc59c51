package image

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// The short names of the two kinds: their DVCR repositories' and importer Pods' prefixes.
const (
	ShortCVI = "cvi"
	ShortVI  = "vi"
)

// ImageDeleter removes an image from DVCR; one that is not there is no error.
type ImageDeleter interface {
	Delete(ctx context.Context, ref string) error
}

// Config is what a Reconciler is made of.
type Config struct {
	Kind   Kind
	Client client.Client
	// APIReader reads past the cache before an importer Pod is created, so a cache that lags
	// behind (a Pod just deleted, a status just written) never starts a second import. It
	// also reads pull secrets, which are not cached.
	APIReader client.Reader
	Pods      PodConfig
	Progress  importerpod.Scraper
	Images    ImageDeleter
	Clock     clock.PassiveClock
	Recorder  events.EventRecorder
	Metrics   *ImportMetrics
	// NewToken makes an Upload source's token (importerpod.AnnotationUploadToken).
	NewToken func() (string, error)
	// DVCRExporter serves an image kept on a claim from DVCR to its filler.
	DVCRExporter importerpod.DVCRExporter
	// ProgressInterval is how often a running import's progress is read; SourceInterval how
	// often a source the import waits for (an object not Ready, a missing Secret) is looked at.
	ProgressInterval time.Duration
	SourceInterval   time.Duration
}

// Reconciler carries out Decide for one Kind, one step per reconcile. It is level-based: each
// reconcile reads the image and its importer Pod afresh.
type Reconciler struct{ Config }

// NewReconciler wires a Reconciler.
func NewReconciler(c Config) *Reconciler { return &Reconciler{Config: c} }

// SetupWithManager watches the Kind's images and their importer Pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(r.Kind.NewObject()).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.imageOf)).
		Named(strings.ToLower(r.Kind.Name())).
		Complete(r)
}

// imageOf is the image an importer Pod of this Kind imports.
func (r *Reconciler) imageOf(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[LabelImageKind] != r.Kind.Short() {
		return nil
	}
	a := o.GetAnnotations()
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a[AnnotationImageNamespace], Name: a[AnnotationImageName]}}}
}

// Reconcile does the next step for one image.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.Kind.NewObject()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	img := View(r.Kind, obj)
	pod, err := r.importerPod(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	exporter, err := r.exporterPod(ctx, r.Client, img)
	if err != nil {
		return ctrl.Result{}, err
	}
	filler, err := r.fillerPod(ctx, img)
	if err != nil {
		return ctrl.Result{}, err
	}
	step := Decide(r.Kind.Short(), img, pod, exporter, filler)
	log.FromContext(ctx).V(1).Info("reconcile", "step", step.String(), "phase", img.Status.Phase)
	switch step {
	case StepAddFinalizer:
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		controllerutil.AddFinalizer(obj, Finalizer(r.Kind.Short()))
		return ctrl.Result{}, wrap("add finalizer", r.Client.Patch(ctx, obj, patch))
	case StepCleanup:
		return ctrl.Result{}, r.cleanup(ctx, img, pod, exporter != nil || filler != nil)
	case StepDeletePod:
		return ctrl.Result{}, r.deleteImporter(ctx, img, pod)
	case StepStart:
		return r.start(ctx, obj)
	case StepWatchProgress:
		p := importerpod.ReadProgress(ctx, r.Progress, pod)
		s := ProvisioningStatus(img, p, r.now())
		if WaitsForUpload(img, p) {
			// The URL appears once the uploader is ready to take the upload.
			s = UploaderStartingStatus(img, r.now())
			if importerpod.Ready(pod) {
				svc, err := r.uploaderService(ctx, img)
				if err != nil {
					return ctrl.Result{}, err
				}
				s = WaitForUploadStatus(img, r.Pods.UploadURLs(r.Kind, img, svc, pod), r.now())
			}
		}
		return ctrl.Result{RequeueAfter: r.ProgressInterval}, r.setStatus(ctx, obj, s)
	case StepFill:
		return r.fill(ctx, img, filler)
	case StepRecordResult:
		res := importerresult.Of(pod)
		s := ResultStatus(img, res, r.Pods.RegistryURL(r.repository(obj)), r.now())
		if img.Storage == v1alpha2.StoragePersistentVolumeClaim && res.Reason == contract.ReasonCompleted {
			s = ImportedStatus(img, res, r.now())
		}
		if err := r.setStatus(ctx, obj, s); err != nil {
			return ctrl.Result{}, err
		}
		r.Metrics.Observe(r.Kind.Short(), res, importerresult.Seconds(pod))
		return ctrl.Result{}, r.deleteImporter(ctx, img, pod)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) repository(obj client.Object) string {
	return Repository(r.Kind.Short(), client.ObjectKeyFromObject(obj))
}

// cleanup: the importer (and exporter) go first, then the image in DVCR (when it may be
// there), then the finalizer.
func (r *Reconciler) cleanup(ctx context.Context, img Image, pod *corev1.Pod, helpers bool) error {
	obj := img.Object
	if err := r.deleteImporter(ctx, img, pod); err != nil || pod != nil || helpers {
		return err
	}
	if InDVCR(img) {
		ref := r.Pods.PushRef(r.repository(obj))
		if err := r.Images.Delete(ctx, ref); err != nil {
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "FailedDeleteImage", "Delete", "Error deleting %s from DVCR: %v", ref, err)
			return fmt.Errorf("delete image from DVCR: %w", err)
		}
		log.FromContext(ctx).Info("image deleted from DVCR", "image", ref)
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(obj, Finalizer(r.Kind.Short()))
	return wrap("remove finalizer", r.Client.Patch(ctx, obj, patch))
}

func (r *Reconciler) importerPod(ctx context.Context, reader client.Reader, key types.NamespacedName) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	found, err := get(ctx, reader, types.NamespacedName{Namespace: r.Pods.Namespace, Name: PodName(r.Kind.Short(), key)}, pod)
	if !found || err != nil {
		return nil, wrap("importer pod", err)
	}
	return pod, nil
}

// uploaderService is img's uploader Service, read past the cache (Services are not cached); nil
// when it is not there.
func (r *Reconciler) uploaderService(ctx context.Context, img Image) (*corev1.Service, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: r.Pods.Namespace, Name: ServiceName(r.Kind.Short(), client.ObjectKeyFromObject(img.Object))}
	if found, err := get(ctx, r.APIReader, key, svc); !found || err != nil {
		return nil, wrap("uploader service", err)
	}
	return svc, nil
}

// exporterPod is the exporter of img's VirtualDisk source; nil when there is none, or the
// source is no disk.
func (r *Reconciler) exporterPod(ctx context.Context, reader client.Reader, img Image) (*corev1.Pod, error) {
	ns, ok := exporterNamespace(img)
	if !ok {
		return nil, nil
	}
	pod := &corev1.Pod{}
	found, err := get(ctx, reader, types.NamespacedName{Namespace: ns, Name: ExporterName(r.Kind.Short(), client.ObjectKeyFromObject(img.Object))}, pod)
	if !found || err != nil || pod.Labels[LabelImageKind] != r.Kind.Short() {
		return nil, wrap("exporter pod", err)
	}
	return pod, nil
}

// fillerPod is the filler of an image kept on a claim; nil when there is none.
func (r *Reconciler) fillerPod(ctx context.Context, img Image) (*corev1.Pod, error) {
	if img.Storage != v1alpha2.StoragePersistentVolumeClaim {
		return nil, nil
	}
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: img.Object.GetNamespace(), Name: FillerName(r.Kind.Short(), client.ObjectKeyFromObject(img.Object))}
	found, err := get(ctx, r.Client, key, pod)
	if !found || err != nil || pod.Labels[LabelImageKind] != r.Kind.Short() {
		return nil, wrap("filler pod", err)
	}
	return pod, nil
}

// storageClass is the class of img's claim, or a storageclass.Error.
func (r *Reconciler) storageClass(ctx context.Context, img Image) (storageclass.Choice, error) {
	var classes storagev1.StorageClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return storageclass.Choice{}, fmt.Errorf("list storage classes: %w", err)
	}
	return storageclass.Choose("spec.persistentVolumeClaim.storageClassName", img.StorageClass, classes.Items)
}

// fill makes img's claim and fills it from DVCR (img is there: Imported), one step per reconcile:
// the claim, then the filler's Secret and Pod, its progress, its result. A filled claim makes
// the image Ready once its DVCR copy is deleted; a failed fill makes it Failed and deletes the
// claim.
func (r *Reconciler) fill(ctx context.Context, img Image, filler *corev1.Pod) (ctrl.Result, error) {
	obj := img.Object
	claim := &corev1.PersistentVolumeClaim{}
	claimKey := client.ObjectKey{Namespace: obj.GetNamespace(), Name: ClaimName(r.Kind.Short(), obj)}
	found, err := get(ctx, r.Client, claimKey, claim)
	if err == nil && !found {
		found, err = get(ctx, r.APIReader, claimKey, claim)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	class := img.Status.StorageClassName
	if found && claim.Spec.StorageClassName != nil {
		class = *claim.Spec.StorageClassName
	}
	switch {
	case filler != nil && importerresult.Done(filler):
		return ctrl.Result{}, r.recordFill(ctx, img, importerresult.Of(filler), claim)
	case filler != nil:
		return ctrl.Result{RequeueAfter: r.ProgressInterval}, r.setStatus(ctx, obj, FillingStatus(img, claim.Name, class, importerpod.ReadProgress(ctx, r.Progress, filler), r.now()))
	case !found:
		choice, err := r.storageClass(ctx, img)
		if err != nil {
			var e *storageclass.Error
			if !errors.As(err, &e) {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: r.SourceInterval}, r.setStatus(ctx, obj, StorageClassStatus(img, err, r.now()))
		}
		size, _ := strconv.ParseInt(img.Status.Size.UnpackedBytes, 10, 64)
		claim = r.Pods.Claim(r.Kind, img, choice, size)
		if err := r.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "FailedCreate", "Fill", "Error creating PersistentVolumeClaim %s: %v", claim.Name, err)
			return ctrl.Result{}, fmt.Errorf("create claim: %w", err)
		}
		log.FromContext(ctx).Info("claim created", "claim", claim.Name, "storageClass", choice.Name, "size", size)
		class = choice.Name
	}
	exp, ok, err := r.DVCRExporter.Ensure(ctx, FillerExporterName(r.Kind.Short(), img), r.Pods.FillerExportFor(r.Kind, img), r.Pods.RegistryURL(r.repository(obj)))
	if failed := (*importerpod.FailedError)(nil); errors.As(err, &failed) {
		return ctrl.Result{}, r.recordFill(ctx, img, failed.Result, claim)
	}
	if !ok || err != nil {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	if err := r.Client.Create(ctx, r.Pods.FillerSecret(r.Kind, img, exp.Token)); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create filler secret: %w", err)
	}
	size, _ := strconv.ParseInt(img.Status.Size.UnpackedBytes, 10, 64)
	pod := r.Pods.FillerPod(r.Kind, img, exp.URL, claim, size)
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "FailedCreate", "Fill", "Error creating filler pod %s: %v", pod.Name, err)
		return ctrl.Result{}, fmt.Errorf("create filler pod: %w", err)
	}
	log.FromContext(ctx).Info("filler pod created", "pod", pod.Name, "claim", claim.Name)
	return ctrl.Result{RequeueAfter: r.ProgressInterval}, r.setStatus(ctx, obj, FillingStatus(img, claim.Name, class, nil, r.now()))
}

// recordFill records the filler's end (or its exporter's failure): the DVCR copy goes either way;
// then the image is Ready on its claim, or Failed and the claim goes. The filler goes once the
// image is finished (Decide).
func (r *Reconciler) recordFill(ctx context.Context, img Image, res contract.Result, claim *corev1.PersistentVolumeClaim) error {
	obj := img.Object
	ref := r.Pods.PushRef(r.repository(obj))
	if err := r.Images.Delete(ctx, ref); err != nil {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "FailedDeleteImage", "Fill", "Error deleting %s from DVCR: %v", ref, err)
		return fmt.Errorf("delete image from DVCR: %w", err)
	}
	if res.Reason == contract.ReasonCompleted {
		return r.setStatus(ctx, obj, FilledStatus(img, res, r.now()))
	}
	if claim.UID != "" {
		if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete claim: %w", err)
		}
	}
	return r.setStatus(ctx, obj, ResultStatus(img, res, "", r.now()))
}

// exporterNamespace is where img's exporter runs, if it may have one: the namespace of its
// VirtualDisk source, or of its VirtualImage source (one kept on a claim is exported too).
func exporterNamespace(img Image) (string, bool) {
	ref := img.Source.Ref
	if img.Source.Type != v1alpha2.DataSourceTypeObjectRef || ref == nil || (ref.Kind != v1alpha2.VirtualDiskKind && ref.Kind != v1alpha2.VirtualImageKind) {
		return "", false
	}
	return ref.Namespace, true
}

// export makes sure img's exporter serves disk. ready: it does, and l has its URL and token;
// else a reconcile looks again (the exporter's Pod events also bring one). An exporter that
// ended (it found no disk in the claim) fails the image with its result.
func (r *Reconciler) export(ctx context.Context, obj client.Object, img Image, disk DiskRef, l *Lookup) (ready bool, err error) {
	ns, _ := exporterNamespace(img)
	secret := &corev1.Secret{}
	name := ExporterName(r.Kind.Short(), client.ObjectKeyFromObject(obj))
	found, err := get(ctx, r.APIReader, types.NamespacedName{Namespace: ns, Name: name}, secret)
	if err != nil {
		return false, wrap("exporter secret", err)
	}
	if found && secret.Labels[LabelImageUID] != string(obj.GetUID()) {
		return false, r.deleteExporter(ctx, img)
	}
	if !found {
		token, err := r.NewToken()
		if err != nil {
			return false, fmt.Errorf("export token: %w", err)
		}
		secret = r.Pods.ExporterSecret(r.Kind, img, ns, token)
		if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create exporter secret: %w", err)
		}
	}
	pod := &corev1.Pod{}
	found, err = get(ctx, r.APIReader, types.NamespacedName{Namespace: ns, Name: name}, pod)
	switch {
	case err != nil:
		return false, wrap("exporter pod", err)
	case !found:
		pod = r.Pods.ExporterPod(r.Kind, img, ns, disk)
		if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "FailedCreate", "Export", "Error creating exporter pod %s/%s: %v", ns, name, err)
			return false, fmt.Errorf("create exporter pod: %w", err)
		}
		log.FromContext(ctx).Info("exporter pod created", "pod", ns+"/"+name, "claim", disk.Claim)
		return false, nil
	case pod.Labels[LabelImageUID] != string(obj.GetUID()):
		return false, r.deleteExporter(ctx, img)
	case importerresult.Done(pod):
		// Stopped from outside (Completed): it starts again. Failed: so is the image.
		if res := importerresult.Of(pod); res.Reason != contract.ReasonCompleted {
			if err := r.setStatus(ctx, obj, ResultStatus(img, res, "", r.now())); err != nil {
				return false, err
			}
		}
		return false, r.deleteExporter(ctx, img)
	case pod.Status.PodIP == "" || !importerpod.Ready(pod):
		return false, nil
	}
	l.ExportURL, l.ExportToken = importerpod.ExportURL(pod), secret.Data[importerpod.KeyExportToken]
	return true, nil
}

// start starts the import after the apiserver (not the cache) confirms it is still due and
// the source can be read; else the image is Pending with what it waits for.
func (r *Reconciler) start(ctx context.Context, cached client.Object) (ctrl.Result, error) {
	obj := r.Kind.NewObject()
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := client.ObjectKeyFromObject(obj)
	img := View(r.Kind, obj)
	pod, err := r.importerPod(ctx, r.APIReader, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if Decide(r.Kind.Short(), img, pod, nil) != StepStart {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	l, err := r.lookup(ctx, img.Source)
	if err != nil {
		return ctrl.Result{}, err
	}
	if b := CheckSource(img, l); b != nil {
		res := ctrl.Result{}
		if b.Wait {
			res.RequeueAfter = r.SourceInterval
		}
		// An exporter started before the disk was taken into use again goes.
		if err := r.deleteExporter(ctx, img); err != nil {
			return ctrl.Result{}, err
		}
		return res, r.setStatus(ctx, obj, PendingStatus(img, *b, r.now()))
	}
	if img.Storage == v1alpha2.StoragePersistentVolumeClaim {
		// The claim is made after the import into DVCR: its class must be there first.
		if _, err := r.storageClass(ctx, img); err != nil {
			var e *storageclass.Error
			if !errors.As(err, &e) {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: r.SourceInterval}, r.setStatus(ctx, obj, StorageClassStatus(img, err, r.now()))
		}
	}
	if l.Ref != nil && l.Ref.Disk != nil {
		ready, err := r.export(ctx, obj, img, *l.Ref.Disk, &l)
		if err != nil || !ready {
			if err == nil && !finished(View(r.Kind, obj)) {
				err = r.setStatus(ctx, obj, ProvisioningStatus(img, nil, r.now()))
			}
			return ctrl.Result{RequeueAfter: r.ProgressInterval}, err
		}
	}
	if img.Source.Type == v1alpha2.DataSourceTypeUpload && obj.GetAnnotations()[importerpod.AnnotationUploadToken] == "" {
		return ctrl.Result{}, r.addUploadToken(ctx, obj)
	}
	secret := r.Pods.SourceSecret(r.Kind, img, l)
	if secret != nil {
		if err := r.putSecret(ctx, secret); err != nil {
			return ctrl.Result{}, err
		}
	}
	pod = r.Pods.ImporterPod(r.Kind, img, r.repository(obj), l, secret)
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "FailedCreate", "Import", "Error creating importer pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return ctrl.Result{}, fmt.Errorf("create importer pod: %w", err)
	}
	log.FromContext(ctx).Info("importer pod created", "pod", pod.Name, "source", string(img.Source.Type))
	if img.Source.Type == v1alpha2.DataSourceTypeUpload {
		svc := r.Pods.UploaderService(r.Kind, img)
		if err := r.Client.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create uploader service: %w", err)
		}
		return ctrl.Result{RequeueAfter: r.ProgressInterval}, r.setStatus(ctx, obj, UploaderStartingStatus(img, r.now()))
	}
	s := ProvisioningStatus(img, nil, r.now())
	if l.Ref != nil {
		s.SourceUID = &l.Ref.UID
	}
	return ctrl.Result{}, r.setStatus(ctx, obj, s)
}

// lookup reads the objects src names: an ObjectRef's image (from the cache) and a pull secret
// (from the apiserver: Secrets are not cached).
func (r *Reconciler) lookup(ctx context.Context, src Source) (Lookup, error) {
	var l Lookup
	if src.Ref != nil {
		ref, err := r.refState(ctx, *src.Ref)
		if err != nil {
			return l, err
		}
		l.Ref = ref
	}
	if src.PullSecret != nil {
		s := &corev1.Secret{}
		found, err := get(ctx, r.APIReader, *src.PullSecret, s)
		if err != nil {
			return l, fmt.Errorf("get the pull secret: %w", err)
		}
		l.PullSecretFound, l.PullSecret = found, s.Data[corev1.DockerConfigJsonKey]
	}
	return l, nil
}

// refState is what ref's image looks like; nil when it does not exist (or is of a kind that
// CheckSource refuses).
func (r *Reconciler) refState(ctx context.Context, ref ObjectRef) (*RefState, error) {
	switch ref.Kind {
	case v1alpha2.ClusterVirtualImageKind:
		o := &v1alpha2.ClusterVirtualImage{}
		if found, err := get(ctx, r.Client, ref.NamespacedName, o); !found || err != nil {
			return nil, err
		}
		return &RefState{UID: o.UID, Phase: string(o.Status.Phase), Repository: Repository(ShortCVI, ref.NamespacedName)}, nil
	case v1alpha2.VirtualDiskKind:
		return r.diskState(ctx, ref.NamespacedName)
	case v1alpha2.VirtualImageKind:
		o := &v1alpha2.VirtualImage{}
		if found, err := get(ctx, r.Client, ref.NamespacedName, o); !found || err != nil {
			return nil, err
		}
		s := &RefState{UID: o.UID, Phase: string(o.Status.Phase)}
		if o.Spec.Storage == v1alpha2.StorageContainerRegistry {
			s.Repository = Repository(ShortVI, ref.NamespacedName)
			return s, nil
		}
		// Kept on a claim: read as a disk is, through an exporter.
		claim := &corev1.PersistentVolumeClaim{}
		name := o.Status.Target.PersistentVolumeClaimName
		if found, err := get(ctx, r.Client, types.NamespacedName{Namespace: ref.Namespace, Name: name}, claim); name == "" || !found || err != nil {
			return s, err
		}
		s.Disk = &DiskRef{Claim: name, Block: claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock}
		return s, nil
	}
	return nil, nil
}

// diskState is what the VirtualDisk key looks like as a source: its claim (from the cache, which
// holds the disks' claims) and the machines that have it mounted.
func (r *Reconciler) diskState(ctx context.Context, key types.NamespacedName) (*RefState, error) {
	vd := &v1alpha2.VirtualDisk{}
	if found, err := get(ctx, r.Client, key, vd); !found || err != nil {
		return nil, err
	}
	s := &RefState{UID: vd.UID, Phase: string(vd.Status.Phase)}
	claim := &corev1.PersistentVolumeClaim{}
	name := vd.Status.Target.PersistentVolumeClaimName
	if name == "" {
		return s, nil
	}
	if found, err := get(ctx, r.Client, types.NamespacedName{Namespace: key.Namespace, Name: name}, claim); !found || err != nil {
		return s, err
	}
	s.Disk = &DiskRef{Claim: name, Block: claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock}
	for _, vm := range vd.Status.AttachedToVirtualMachines {
		if vm.Mounted {
			s.Disk.RunningVMs = append(s.Disk.RunningVMs, vm.Name)
		}
	}
	return s, nil
}

// get reads key into obj; false when it does not exist.
func get(ctx context.Context, reader client.Reader, key types.NamespacedName, obj client.Object) (bool, error) {
	err := reader.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %s: %w", key, err)
	}
	return true, nil
}

// addUploadToken gives an image with an Upload source the token its uploader will take.
func (r *Reconciler) addUploadToken(ctx context.Context, obj client.Object) error {
	token, err := r.NewToken()
	if err != nil {
		return fmt.Errorf("upload token: %w", err)
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[importerpod.AnnotationUploadToken] = token
	obj.SetAnnotations(a)
	return wrap("add upload token", r.Client.Patch(ctx, obj, patch))
}

// putSecret creates the import's Secret, or overwrites one left by an earlier import.
func (r *Reconciler) putSecret(ctx context.Context, s *corev1.Secret) error {
	err := r.Client.Create(ctx, s)
	if !apierrors.IsAlreadyExists(err) {
		return wrap("create importer secret", err)
	}
	old := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s), old); err != nil {
		return fmt.Errorf("get importer secret: %w", err)
	}
	old.Labels, old.Annotations, old.OwnerReferences, old.Data = s.Labels, s.Annotations, s.OwnerReferences, s.Data
	return wrap("update importer secret", r.Client.Update(ctx, old))
}

// deleteImporter deletes the importer Pod (when there is one) after its Secret and Service, and
// the exporter (when there is one).
func (r *Reconciler) deleteImporter(ctx context.Context, img Image, pod *corev1.Pod) error {
	obj := img.Object
	if err := r.deleteCompanions(ctx, obj); err != nil {
		return err
	}
	if err := r.deleteExporter(ctx, img); err != nil {
		return err
	}
	if err := r.deleteFiller(ctx, img); err != nil {
		return err
	}
	if pod == nil {
		return nil
	}
	err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete importer pod: %w", err)
	}
	log.FromContext(ctx).Info("importer pod deleted", "pod", pod.Name, "image", obj.GetName())
	return nil
}

// deleteCompanions deletes the importer's Secret and uploader Service; either may not exist.
func (r *Reconciler) deleteCompanions(ctx context.Context, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Pods.Namespace, Name: PodName(r.Kind.Short(), key)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: r.Pods.Namespace, Name: ServiceName(r.Kind.Short(), key)}},
	} {
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete importer %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// deleteExporter deletes img's exporter Pod and Secret; deleteFiller its filler's.
func (r *Reconciler) deleteExporter(ctx context.Context, img Image) error {
	ns, ok := exporterNamespace(img)
	if !ok {
		return nil
	}
	return r.deleteOwn(ctx, types.NamespacedName{Namespace: ns, Name: ExporterName(r.Kind.Short(), client.ObjectKeyFromObject(img.Object))})
}

func (r *Reconciler) deleteFiller(ctx context.Context, img Image) error {
	if img.Storage != v1alpha2.StoragePersistentVolumeClaim {
		return nil
	}
	if err := r.DVCRExporter.Delete(ctx, FillerExporterName(r.Kind.Short(), img)); err != nil {
		return err
	}
	return r.deleteOwn(ctx, client.ObjectKey{Namespace: img.Object.GetNamespace(), Name: FillerName(r.Kind.Short(), client.ObjectKeyFromObject(img.Object))})
}

// deleteOwn deletes the Pod and the Secret key, read afresh, when they are of this Kind's:
// they are in a user's namespace, where another object may have the name.
func (r *Reconciler) deleteOwn(ctx context.Context, key types.NamespacedName) error {
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Secret{}} {
		found, err := get(ctx, r.APIReader, key, o)
		if err != nil {
			return err
		}
		if !found || o.GetLabels()[LabelImageKind] != r.Kind.Short() {
			continue
		}
		uid := o.GetUID()
		if err := r.Client.Delete(ctx, o, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %T %s: %w", o, key, err)
		}
	}
	return nil
}

// setStatus writes status when it differs, with an Event when the phase changes.
func (r *Reconciler) setStatus(ctx context.Context, obj client.Object, s Status) error {
	cur := r.Kind.Status(obj)
	if equality.Semantic.DeepEqual(cur, s) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	r.Kind.SetStatus(obj, s)
	if err := r.Client.Status().Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if cur.Phase == s.Phase {
		return nil
	}
	ready := meta.FindStatusCondition(s.Conditions, condReady)
	kind, note := corev1.EventTypeNormal, fmt.Sprintf("Phase %s", s.Phase)
	if ready != nil && ready.Message != "" {
		note += ": " + ready.Message
	}
	if s.Phase == v1alpha2.ImageFailed {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(obj, nil, kind, string(s.Phase), "Import", "%s", note)
	log.FromContext(ctx).Info("phase changed", "from", cur.Phase, "to", s.Phase, "kind", r.Kind.Name(), "image", client.ObjectKeyFromObject(obj).String())
	return nil
}

func (r *Reconciler) now() metav1.Time { return metav1.NewTime(r.Clock.Now().Truncate(time.Second)) }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
