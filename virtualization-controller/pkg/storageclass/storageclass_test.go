package storageclass

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestClaimRequest(t *testing.T) {
	for _, tc := range []struct {
		size int64
		mode corev1.PersistentVolumeMode
		want string
	}{
		{100 << 20, corev1.PersistentVolumeBlock, "100Mi"},
		{100 << 20, corev1.PersistentVolumeFilesystem, "100Mi"},
		{10 << 30, corev1.PersistentVolumeFilesystem, "10Gi"},
		{1, corev1.PersistentVolumeFilesystem, "1Mi"},
		{100<<20 + 1, corev1.PersistentVolumeBlock, "101Mi"},
	} {
		if got := ClaimRequest(tc.size); got.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("ClaimRequest(%d) = %s, want %s", tc.size, got.String(), tc.want)
		}
	}
}
