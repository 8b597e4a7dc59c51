package vmbda

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/controller/vd"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
	"github.com/d8virt/virtualization-controller/pkg/kubeget"
	"github.com/d8virt/virtualization-controller/pkg/kubename"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// The core hot-plugs claims, not container disks. An attachment of an image in DVCR (a
// VirtualImage with storage ContainerRegistry, a ClusterVirtualImage) first copies it onto a
// claim of its own in the machine's namespace, made in the default StorageClass and bound on the
// machine's node (its filler runs there: a volume of a WaitForFirstConsumer class is where the
// machine can use it), then plugs that claim in read-only. The filler is the importer reading a
// DVCR exporter in the module's namespace (importerpod.DVCRExporter): DVCR's credentials stay
// there. The claim records how the copy ended; it goes with the attachment.

const (
	// LabelVMBDAUID names the attachment a copy's claim, filler and exporter serve.
	LabelVMBDAUID = "virtualization.deckhouse.io/vmbda-uid"
	// AnnotationCopied on a copy's claim: it holds the image.
	AnnotationCopied = "virtualization.deckhouse.io/image-copied"
	// AnnotationCopyFailed on a copy's claim: why the copy failed (it is not tried again).
	AnnotationCopyFailed = "virtualization.deckhouse.io/image-copy-failed"
)

// CopySource is an image in DVCR to copy: its reference and unpacked size in bytes.
type CopySource struct {
	Image string
	Size  int64
}

// CopyRequest is a copy onto a claim bound on Node.
type CopyRequest struct {
	Image string
	Size  int64
	Node  string
}

// CopyState is how an attachment's copy went, read from its claim.
type CopyState struct {
	// Filled: the claim holds the image.
	Filled bool
	// Failed is why the copy failed, "" when it did not.
	Failed string
	// Node is where the claim's volume was bound for its first consumer (the scheduler's
	// annotation of a WaitForFirstConsumer claim), "" when anywhere.
	Node string
	// Progress is the running filler's, nil when there is none or it cannot be read.
	Progress *importerprogress.Progress
}

// AnnotationSelectedNode is the scheduler's annotation of a WaitForFirstConsumer claim: the node
// its volume is made on.
const AnnotationSelectedNode = "volume.kubernetes.io/selected-node"

// CopyClaimName is the claim an attachment's copy goes to.
func CopyClaimName(a *v1alpha2.VirtualMachineBlockDeviceAttachment) string {
	return kubename.Join("vmbda", a.Name, string(a.UID))
}

// FillerName is the filler Pod (and its Secret) of an attachment's copy.
func FillerName(a *v1alpha2.VirtualMachineBlockDeviceAttachment) string {
	return kubename.Join("vmbda-filler", a.Name)
}

// ExporterName is the DVCR exporter of an attachment's copy, in the module's namespace.
func ExporterName(a *v1alpha2.VirtualMachineBlockDeviceAttachment) string {
	return kubename.Join("vmbda-export", string(a.UID))
}

// CopyStateOf reads the state from the copy's claim (nil: none yet; one being deleted is none).
func CopyStateOf(claim *corev1.PersistentVolumeClaim) CopyState {
	if claim == nil || claim.DeletionTimestamp != nil {
		return CopyState{}
	}
	_, filled := claim.Annotations[AnnotationCopied]
	return CopyState{Filled: filled, Failed: claim.Annotations[AnnotationCopyFailed], Node: claim.Annotations[AnnotationSelectedNode]}
}

// elsewhere: the claim's volume is bound to another node than node, where the VM now runs (it
// restarted elsewhere): a copy there is made anew.
func elsewhere(claim *corev1.PersistentVolumeClaim, node string) bool {
	n := claim.Annotations[AnnotationSelectedNode]
	return n != "" && n != node
}

// Copier carries out the copies.
type Copier struct {
	// Client writes, and reads what the cache holds (the managed claims and Pods).
	Client   client.Client
	Exporter importerpod.DVCRExporter
	// Progress reads a running filler's progress.
	Progress importerpod.Scraper
	// Image is the importer's image; Log how it logs.
	Image string
	Log   logopts.Options
}

func copyLabels(a *v1alpha2.VirtualMachineBlockDeviceAttachment, what string) map[string]string {
	return map[string]string{vd.LabelManagedBy: vd.ManagedBy, LabelVMBDAUID: string(a.UID), "app.kubernetes.io/name": what}
}

// ownedMeta is the metadata of a's object name in its namespace: owned by a, labelled managed
// (the cache holds it, DVCR's collection waits for a running filler).
func ownedMeta(a *v1alpha2.VirtualMachineBlockDeviceAttachment, name, what string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: copyLabels(a, what),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "VirtualMachineBlockDeviceAttachment",
			Name: a.Name, UID: a.UID, Controller: ptr.To(true),
		}}}
}

// CopyClaim is the one builder of the claim a's copy goes to: size bytes in class.
func CopyClaim(a *v1alpha2.VirtualMachineBlockDeviceAttachment, class storageclass.Choice, size int64) *corev1.PersistentVolumeClaim {
	return class.Claim(ownedMeta(a, CopyClaimName(a), "image-copy"), size)
}

// FillerPod is a's filler: copying from the exporter at url onto claim, on node.
func (c Copier) FillerPod(a *v1alpha2.VirtualMachineBlockDeviceAttachment, url string, claim *corev1.PersistentVolumeClaim, size int64, node string) *corev1.Pod {
	pod := importerpod.FillerPod(c.Image, c.Log, ownedMeta(a, FillerName(a), "filler"), url, claim, size)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	return pod
}

// State reads a's copy state, with its running filler's progress.
func (c Copier) State(ctx context.Context, a *v1alpha2.VirtualMachineBlockDeviceAttachment) (CopyState, error) {
	claim, err := kubeget.Optional(ctx, c.Client, types.NamespacedName{Namespace: a.Namespace, Name: CopyClaimName(a)}, &corev1.PersistentVolumeClaim{})
	if err != nil {
		return CopyState{}, err
	}
	st := CopyStateOf(claim)
	if claim == nil || st.Filled || st.Failed != "" {
		return st, nil
	}
	filler, err := kubeget.Optional(ctx, c.Client, types.NamespacedName{Namespace: a.Namespace, Name: FillerName(a)}, &corev1.Pod{})
	if err != nil {
		return st, err
	}
	if filler != nil && !importerresult.Done(filler) {
		st.Progress = importerpod.ReadProgress(ctx, c.Progress, filler)
	}
	return st, nil
}

// Step takes the next step of a's copy, one a call: the claim, the exporter (until it serves),
// the filler's Secret and Pod; once the filler ends, its outcome goes onto the claim and the
// filler and exporter go. wait: look again soon (the exporter is not watched).
func (c Copier) Step(ctx context.Context, a *v1alpha2.VirtualMachineBlockDeviceAttachment, req CopyRequest) (wait bool, err error) {
	claim, err := kubeget.Optional(ctx, c.Client, types.NamespacedName{Namespace: a.Namespace, Name: CopyClaimName(a)}, &corev1.PersistentVolumeClaim{})
	if err != nil {
		return false, err
	}
	switch {
	case claim != nil && claim.DeletionTimestamp != nil:
		return true, nil // a copy on another node goes first
	case claim != nil && elsewhere(claim, req.Node):
		if err := c.Cleanup(ctx, a); err != nil {
			return false, err
		}
		if err := c.Client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete the copy on node %s: %w", claim.Annotations[AnnotationSelectedNode], err)
		}
		log.FromContext(ctx).Info("copy claim on another node deleted", "claim", claim.Name, "node", req.Node)
		return true, nil
	case claim == nil:
		var classes storagev1.StorageClassList
		if err := c.Client.List(ctx, &classes); err != nil {
			return false, fmt.Errorf("list storage classes: %w", err)
		}
		class, err := storageclass.Choose("the default StorageClass", nil, classes.Items)
		if err != nil {
			return false, fmt.Errorf("a claim for the copy: %w", err)
		}
		claim = CopyClaim(a, class, req.Size)
		if err := c.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create the copy's claim: %w", err)
		}
		log.FromContext(ctx).Info("copy claim created", "claim", claim.Name, "class", class.Name, "image", req.Image)
		return false, nil
	}
	filler, err := kubeget.Optional(ctx, c.Client, types.NamespacedName{Namespace: a.Namespace, Name: FillerName(a)}, &corev1.Pod{})
	if err != nil {
		return false, err
	}
	if filler != nil && importerresult.Done(filler) {
		res := importerresult.Of(filler)
		key := AnnotationCopied
		value := "true"
		if res.Reason != contract.ReasonCompleted {
			key, value = AnnotationCopyFailed, string(res.Reason)+": "+res.Message
		}
		patch := client.MergeFrom(claim.DeepCopy())
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, key, value)
		if err := c.Client.Patch(ctx, claim, patch); err != nil {
			return false, fmt.Errorf("record the copy's end on its claim: %w", err)
		}
		log.FromContext(ctx).Info("copy ended", "claim", claim.Name, "reason", res.Reason)
		return false, c.Cleanup(ctx, a)
	}
	if filler != nil {
		return false, nil
	}
	exp, ok, err := c.Exporter.Ensure(ctx, ExporterName(a), importerpod.ExportFor{Labels: copyLabels(a, "image-copy"), UIDLabel: LabelVMBDAUID}, req.Image)
	if failed := (*importerpod.FailedError)(nil); errors.As(err, &failed) {
		patch := client.MergeFrom(claim.DeepCopy())
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, AnnotationCopyFailed, failed.Error())
		return false, c.Client.Patch(ctx, claim, patch)
	}
	if err != nil || !ok {
		return true, err
	}
	secret := importerpod.FillerSecret(ownedMeta(a, FillerName(a), "filler"), exp.Token)
	if err := c.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create the filler's secret: %w", err)
	}
	pod := c.FillerPod(a, exp.URL, claim, req.Size, req.Node)
	if err := c.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create the filler: %w", err)
	}
	log.FromContext(ctx).Info("filler created", "pod", pod.Name, "claim", claim.Name, "node", req.Node)
	return false, nil
}

// Leftover: a's filler or exporter is still there (the cache says), after a copy whose end was
// recorded but whose cleanup failed.
func (c Copier) Leftover(ctx context.Context, a *v1alpha2.VirtualMachineBlockDeviceAttachment) (bool, error) {
	for _, key := range []types.NamespacedName{{Namespace: a.Namespace, Name: FillerName(a)}, {Namespace: c.Exporter.Namespace, Name: ExporterName(a)}} {
		pod, err := kubeget.Optional(ctx, c.Client, key, &corev1.Pod{})
		if err != nil || pod != nil {
			return pod != nil, err
		}
	}
	return false, nil
}

// Cleanup deletes a's filler, its Secret and its exporter, if they are there (the claim stays,
// owned by a).
func (c Copier) Cleanup(ctx context.Context, a *v1alpha2.VirtualMachineBlockDeviceAttachment) error {
	m := metav1.ObjectMeta{Namespace: a.Namespace, Name: FillerName(a)}
	for _, obj := range []client.Object{&corev1.Pod{ObjectMeta: m}, &corev1.Secret{ObjectMeta: m}} {
		if err := c.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the copy's filler: %w", err)
		}
	}
	return c.Exporter.Delete(ctx, ExporterName(a))
}
