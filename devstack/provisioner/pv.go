// Package provisioner is the local stack's dynamic provisioner: a sig-storage-lib-external-provisioner
// Provisioner that makes each claim's volume in a hostvol.Store (a sparse file, ext4 in a loop
// mount for Filesystem claims, the loop device for Block claims), a resizer that grows volumes
// when their claims grow, and the default StorageClass that names it.
//
// A PersistentVolume it makes is a `local` volume whose path is on this machine, with node
// affinity to the node the scheduler selected: the node agents run pods on this machine too, and
// the node agent bind-mounts that path (or device) into the pod's containers.
package provisioner

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// Name is the provisioner's name in StorageClasses and in the PVs' provisioned-by annotation.
const Name = "d8v.local/local-provisioner"

// Sizes are whole MiB; ext4 needs some room for its journal and tables.
const (
	mib         = 1 << 20
	minFSSize   = 16 * mib
	minBlockSiz = 1 * mib
)

// Request is what a claim asks the store for.
type Request struct {
	Name string
	Mode corev1.PersistentVolumeMode
	Size int64
}

// VolumeSize is the real size of a volume for a request of want bytes: whole MiB, at least the
// mode's minimum.
func VolumeSize(mode corev1.PersistentVolumeMode, want int64) int64 {
	size := (want + mib - 1) / mib * mib
	min := int64(minFSSize)
	if mode == corev1.PersistentVolumeBlock {
		min = minBlockSiz
	}
	if size < min {
		size = min
	}
	return size
}

func claimMode(pvc *corev1.PersistentVolumeClaim) corev1.PersistentVolumeMode {
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return corev1.PersistentVolumeBlock
	}
	return corev1.PersistentVolumeFilesystem
}

// RequestFor checks a claim and its class and says what volume to make. Errors name the field
// to fix; the library reports them as ProvisioningFailed events on the claim.
func RequestFor(opts controller.ProvisionOptions) (Request, error) {
	pvc, class := opts.PVC, opts.StorageClass
	if len(class.Parameters) > 0 {
		keys := make([]string, 0, len(class.Parameters))
		for k := range class.Parameters {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return Request{}, fmt.Errorf("storageclass %s: parameters.%s: the local provisioner takes no parameters", class.Name, keys[0])
	}
	if pvc.Spec.DataSource != nil || pvc.Spec.DataSourceRef != nil {
		return Request{}, fmt.Errorf("spec.dataSource: the local provisioner makes empty volumes only")
	}
	for _, m := range pvc.Spec.AccessModes {
		if m == corev1.ReadOnlyMany {
			return Request{}, fmt.Errorf("spec.accessModes: %s is not supported (a new volume is empty)", m)
		}
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || want.Sign() <= 0 {
		return Request{}, fmt.Errorf("spec.resources.requests.storage: a positive size is required")
	}
	mode := claimMode(pvc)
	return Request{Name: opts.PVName, Mode: mode, Size: VolumeSize(mode, want.Value())}, nil
}

// NewPV is the PersistentVolume of a volume made for a request at path. It is pinned to the
// selected node; a claim that may be used from many nodes (ReadWriteMany), or one without a
// selected node, may be used from every node, which is the truth on this machine.
func NewPV(opts controller.ProvisionOptions, req Request, path string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpExists,
	}}}
	shared := false
	for _, m := range opts.PVC.Spec.AccessModes {
		shared = shared || m == corev1.ReadWriteMany
	}
	if opts.SelectedNodeName != "" && !shared {
		term.MatchExpressions[0].Operator = corev1.NodeSelectorOpIn
		term.MatchExpressions[0].Values = []string{opts.SelectedNodeName}
	}
	mode := req.Mode
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(req.Size, resource.BinarySI)},
			AccessModes:                   opts.PVC.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              opts.StorageClass.Name,
			VolumeMode:                    &mode,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity:                  &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}},
		},
	}
}

// Ours tells whether this provisioner made the PV.
func Ours(pv *corev1.PersistentVolume) bool {
	return pv.Annotations["pv.kubernetes.io/provisioned-by"] == Name && pv.Spec.Local != nil
}

func pvMode(pv *corev1.PersistentVolume) corev1.PersistentVolumeMode {
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return corev1.PersistentVolumeBlock
	}
	return corev1.PersistentVolumeFilesystem
}
