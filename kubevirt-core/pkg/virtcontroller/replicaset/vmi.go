package replicaset

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// BaseName is the prefix of the VMIs' generated names, as KubeVirt picks it: the template's name
// or generateName when set, else the replica set's name, with no separator added.
func BaseName(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) string {
	if t := rs.Spec.Template; t != nil {
		if t.ObjectMeta.Name != "" {
			return t.ObjectMeta.Name
		}
		if t.ObjectMeta.GenerateName != "" {
			return t.ObjectMeta.GenerateName
		}
	}
	return rs.Name
}

// NewVMI builds one replica from the template, controlled by the replica set so that the
// garbage collector removes it with the replica set and no other controller adopts it.
func NewVMI(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if t := rs.Spec.Template; t != nil {
		vmi.ObjectMeta = *t.ObjectMeta.DeepCopy()
		vmi.Spec = *t.Spec.DeepCopy()
	}
	vmi.Name = ""
	vmi.GenerateName = BaseName(rs)
	vmi.Namespace = rs.Namespace
	vmi.ResourceVersion = ""
	vmi.UID = ""
	vmi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, kubevirtv1.VirtualMachineInstanceReplicaSetGroupVersionKind)}
	return vmi
}
