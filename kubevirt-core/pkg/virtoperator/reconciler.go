package virtoperator

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/kit"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

// deleteRecheck is how soon a KubeVirt being deleted is looked at again while objects remain.
const deleteRecheck = 2 * time.Second

// managedKind is a kind the operator makes, in the order it deletes them: the webhooks and the
// APIService first, so that nothing sends traffic to a virt-api on its way out.
type managedKind struct {
	kind    string
	newObj  func() client.Object
	newList func() client.ObjectList
}

func unstructuredOf(gvk schema.GroupVersionKind) func() client.Object {
	return func() client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}
}

var managedKinds = []managedKind{
	{"ValidatingWebhookConfiguration", func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
		func() client.ObjectList { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} }},
	{"MutatingWebhookConfiguration", func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		func() client.ObjectList { return &admissionregistrationv1.MutatingWebhookConfigurationList{} }},
	{"APIService", unstructuredOf(APIServiceGVK), func() client.ObjectList {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(APIServiceGVK.GroupVersion().WithKind(APIServiceGVK.Kind + "List"))
		return l
	}},
	{"DaemonSet", func() client.Object { return &appsv1.DaemonSet{} }, func() client.ObjectList { return &appsv1.DaemonSetList{} }},
	{"Deployment", func() client.Object { return &appsv1.Deployment{} }, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	{"Service", func() client.Object { return &corev1.Service{} }, func() client.ObjectList { return &corev1.ServiceList{} }},
	{"ClusterRoleBinding", func() client.Object { return &rbacv1.ClusterRoleBinding{} }, func() client.ObjectList { return &rbacv1.ClusterRoleBindingList{} }},
	{"RoleBinding", func() client.Object { return &rbacv1.RoleBinding{} }, func() client.ObjectList { return &rbacv1.RoleBindingList{} }},
	{"ClusterRole", func() client.Object { return &rbacv1.ClusterRole{} }, func() client.ObjectList { return &rbacv1.ClusterRoleList{} }},
	{"Role", func() client.Object { return &rbacv1.Role{} }, func() client.ObjectList { return &rbacv1.RoleList{} }},
	{"ServiceAccount", func() client.Object { return &corev1.ServiceAccount{} }, func() client.ObjectList { return &corev1.ServiceAccountList{} }},
	{"Secret", func() client.Object { return &corev1.Secret{} }, func() client.ObjectList { return &corev1.SecretList{} }},
	{"ConfigMap", func() client.Object { return &corev1.ConfigMap{} }, func() client.ObjectList { return &corev1.ConfigMapList{} }},
}

// CacheOptions limit the operator's caches of the kinds it makes to its own objects, by
// ManagedLabels: it must not hold every Secret of the cluster in memory.
func CacheOptions() cache.Options {
	sel := labels.SelectorFromSet(ManagedLabels())
	by := map[client.Object]cache.ByObject{}
	for _, k := range managedKinds {
		by[k.newObj()] = cache.ByObject{Label: sel}
	}
	return cache.Options{ByObject: by}
}

// ClientOptions let the operator read the APIService, which it handles unstructured, from the
// cache too.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// Reconciler installs kubevirt-core for the one KubeVirt it honours and reports its state.
type Reconciler struct {
	// Client speaks kubevirt.io (through the operator's rewriter) and reads from the cache set
	// up with CacheOptions and ClientOptions.
	Client client.Client
	// apiReader reads past the cache, before certificates are issued.
	apiReader client.Reader
	Config    Config
	// clock dates the status and the certificates.
	clock clock.PassiveClock
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the operator's controller, reading and writing through c (see Client) and
// reading past the cache through apiReader (mgr.GetAPIReader()), installing as cfg says, with
// clk for its clock.
func NewReconciler(c client.Client, apiReader client.Reader, cfg Config, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{Client: c, apiReader: apiReader, Config: cfg, clock: clk}
}

// SetupWithManager registers the controller. Any event of a KubeVirt or of an object the
// operator made wakes every KubeVirt: the honoured one re-applies, the others learn whether they
// are honoured now.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allKubeVirts)
	b := ctrl.NewControllerManagedBy(mgr).Named("kubevirt").Watches(&kubevirtv1.KubeVirt{}, all)
	for _, k := range managedKinds {
		b = b.Watches(k.newObj(), all)
	}
	return b.Complete(r)
}

func (r *Reconciler) allKubeVirts(ctx context.Context, _ client.Object) []reconcile.Request {
	var list kubevirtv1.KubeVirtList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "list KubeVirts")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, kv := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: kv.Namespace, Name: kv.Name}})
	}
	return out
}

// Reconcile brings one KubeVirt's installation (or its removal) one step closer to what it asks.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kv, err := kit.Get[kubevirtv1.KubeVirt](ctx, r.Client, req.NamespacedName)
	if kv == nil || err != nil {
		return ctrl.Result{}, err
	}
	var all kubevirtv1.KubeVirtList
	if err := r.Client.List(ctx, &all); err != nil {
		return ctrl.Result{}, fmt.Errorf("list KubeVirts: %w", err)
	}
	active := Active(all.Items)
	switch {
	case active == nil || active.UID != kv.UID:
		return ctrl.Result{}, r.notHonoured(ctx, kv, active)
	case kv.DeletionTimestamp != nil:
		return r.uninstall(ctx, kv)
	}
	return r.install(ctx, kv)
}

// notHonoured marks a KubeVirt that another one outranks. One on its way out just goes: the
// objects it may own in its namespace go with it, the cluster's belong to the active one.
func (r *Reconciler) notHonoured(ctx context.Context, kv *kubevirtv1.KubeVirt, active *kubevirtv1.KubeVirt) error {
	if kv.DeletionTimestamp != nil {
		return r.removeFinalizer(ctx, kv)
	}
	if active == nil {
		return nil
	}
	log.FromContext(ctx).Info("another KubeVirt is honoured, ignoring this one", "active", client.ObjectKeyFromObject(active))
	return r.writeStatus(ctx, kv, Conflicting(kv, active.Namespace+"/"+active.Name, r.clock.Now()))
}

func (r *Reconciler) install(ctx context.Context, kv *kubevirtv1.KubeVirt) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	in := NewInstall(kv, r.Config)
	target := in.Target(r.Config.OperatorVersion)
	fail := func(err error) (ctrl.Result, error) {
		if werr := r.writeStatus(ctx, kv, Failed(kv, target, err, r.clock.Now())); werr != nil {
			logger.Error(werr, "write the failure into the KubeVirt's status")
		}
		return ctrl.Result{}, err
	}
	if !controllerutil.ContainsFinalizer(kv, Finalizer) {
		orig := kv.DeepCopy()
		controllerutil.AddFinalizer(kv, Finalizer)
		if err := r.Client.Patch(ctx, kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	c, renewAt, err := r.certificates(ctx, in)
	if err != nil {
		return fail(err)
	}
	objs, err := customize(in.Objects(c), in.Patches)
	if err != nil {
		return fail(err)
	}
	keep := map[string]bool{}
	var notReady []string
	for _, o := range objs {
		applied, err := r.apply(ctx, o)
		if err != nil {
			return fail(err)
		}
		keep[objectKey(applied.GetKind(), applied.GetNamespace(), applied.GetName())] = true
		if why, err := workloadNotReady(applied); err != nil {
			return fail(err)
		} else if why != "" {
			workload := applied.GetKind() + " " + applied.GetName()
			notReady = append(notReady, workload)
			logger.V(1).Info("workload not ready", "workload", workload, "why", why)
		}
	}
	if _, err := r.prune(ctx, keep); err != nil {
		return fail(err)
	}
	if err := r.writeStatus(ctx, kv, Installed(kv, target, notReady, r.clock.Now())); err != nil {
		return ctrl.Result{}, err
	}
	var res ctrl.Result
	if !renewAt.IsZero() {
		res.RequeueAfter = max(renewAt.Sub(r.clock.Now()), time.Second)
	}
	return res, nil
}

// workloadNotReady says why an applied Deployment or DaemonSet is not available; "" when it is,
// or when obj is no workload.
func workloadNotReady(obj *unstructured.Unstructured) (string, error) {
	var ready bool
	var why string
	switch obj.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			return "", fmt.Errorf("read Deployment %s: %w", obj.GetName(), err)
		}
		ready, why = DeploymentReady(&d)
	case "DaemonSet":
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ds); err != nil {
			return "", fmt.Errorf("read DaemonSet %s: %w", obj.GetName(), err)
		}
		ready, why = DaemonSetReady(&ds)
	default:
		return "", nil
	}
	if ready {
		return "", nil
	}
	return why, nil
}

func (r *Reconciler) uninstall(ctx context.Context, kv *kubevirtv1.KubeVirt) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(kv, Finalizer) {
		return ctrl.Result{}, nil
	}
	left, err := r.prune(ctx, nil)
	done := err == nil && left == 0
	if werr := r.writeStatus(ctx, kv, Deleting(kv, err, done, r.clock.Now())); werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		return ctrl.Result{RequeueAfter: deleteRecheck}, nil
	}
	log.FromContext(ctx).Info("removed the installation")
	return ctrl.Result{}, r.removeFinalizer(ctx, kv)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, kv *kubevirtv1.KubeVirt) error {
	if !controllerutil.ContainsFinalizer(kv, Finalizer) {
		return nil
	}
	orig := kv.DeepCopy()
	controllerutil.RemoveFinalizer(kv, Finalizer)
	if err := r.Client.Patch(ctx, kv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

func (r *Reconciler) writeStatus(ctx context.Context, kv *kubevirtv1.KubeVirt, s kubevirtv1.KubeVirtStatus) error {
	if equality.Semantic.DeepEqual(kv.Status, s) {
		return nil
	}
	orig := kv.DeepCopy()
	kv.Status = s
	if err := r.Client.Status().Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("update KubeVirt status: %w", err)
	}
	return nil
}

// certificates reads the installation's certificates and issues what is missing or due. The
// cache may not hold the operator's latest write yet, so it never issues on the cache's word
// alone: a second CA would roll every pod for nothing.
func (r *Reconciler) certificates(ctx context.Context, in Install) (Certs, time.Time, error) {
	spec := in.CertSpec()
	now := r.clock.Now()
	cur, err := loadCerts(ctx, r.Client, in.Namespace)
	if err != nil {
		return Certs{}, time.Time{}, err
	}
	if renew, _ := certs.Check(cur, spec, now); len(renew) > 0 {
		if cur, err = loadCerts(ctx, r.apiReader, in.Namespace); err != nil {
			return Certs{}, time.Time{}, err
		}
	}
	out, renewed, err := certs.Ensure(cur, spec, now)
	if err != nil {
		return Certs{}, time.Time{}, fmt.Errorf("certificates: %w", err)
	}
	if len(renewed) > 0 {
		log.FromContext(ctx).Info("issued certificates", "certificates", renewed)
	}
	_, next := certs.Check(out, spec, now)
	return out, next, nil
}

func loadCerts(ctx context.Context, c client.Reader, ns string) (Certs, error) {
	var secrets []corev1.Secret
	for _, name := range append([]string{CASecret}, LeafSecrets...) {
		s, err := kit.Get[corev1.Secret](ctx, c, client.ObjectKey{Namespace: ns, Name: name})
		if err != nil {
			return Certs{}, fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
		}
		if s != nil {
			secrets = append(secrets, *s)
		}
	}
	return CertsFromSecrets(secrets), nil
}

// apply server-side applies obj as the operator's field manager, taking over fields others set,
// and returns the object as the apiserver answered.
func (r *Reconciler) apply(ctx context.Context, obj client.Object) (*unstructured.Unstructured, error) {
	u, err := ToApply(obj, r.Client.Scheme())
	if err != nil {
		return nil, err
	}
	key := objectKey(u.GetKind(), u.GetNamespace(), u.GetName())
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply %s: %w", key, err)
	}
	return u, nil
}

// ToApply turns a built object into an apply configuration: with its kind, without status and
// without the nulls of unset fields (creationTimestamp), which apply would read as "remove".
func ToApply(obj client.Object, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, fmt.Errorf("kind of %T: %w", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	delete(m, "status")
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil {
				delete(t, k)
				continue
			}
			dropNulls(x)
		}
	case []any:
		for _, x := range t {
			dropNulls(x)
		}
	}
}

// prune deletes the operator's objects that are not in keep (all of them when keep is nil) and
// says how many of them still exist.
func (r *Reconciler) prune(ctx context.Context, keep map[string]bool) (int, error) {
	logger := log.FromContext(ctx)
	left := 0
	var errs []error
	for _, k := range managedKinds {
		list := k.newList()
		if err := r.Client.List(ctx, list, client.MatchingLabels(ManagedLabels())); err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", k.kind, err))
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return left, fmt.Errorf("read %s list: %w", k.kind, err)
		}
		for _, item := range items {
			o, ok := item.(client.Object)
			if !ok {
				continue
			}
			key := objectKey(k.kind, o.GetNamespace(), o.GetName())
			if keep[key] {
				continue
			}
			left++
			if o.GetDeletionTimestamp() != nil {
				continue
			}
			err := r.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", key, err))
				continue
			}
			logger.Info("deleted", "object", key)
		}
	}
	return left, errors.Join(errs...)
}
