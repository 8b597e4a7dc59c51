package vm

import (
	"k8s.io/apimachinery/pkg/api/equality"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func equalStatus(a, b kubevirtv1.VirtualMachineStatus) bool { return equality.Semantic.DeepEqual(a, b) }
