package image_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/cvicondition"
	"github.com/d8virt/api/core/v1alpha2/vicondition"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
)

// The kinds make the namespaces their sources leave implicit explicit.
func TestSources(t *testing.T) {
	cases := []struct {
		name           string
		img            image.Image
		wantPullSecret *types.NamespacedName
		wantRef        *image.ObjectRef
	}{
		{"cvi, pull secret", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage,
				ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "r/i", ImagePullSecret: &v1alpha2.ImagePullSecret{Namespace: "ns2", Name: "creds"}}}
		}), &types.NamespacedName{Namespace: "ns2", Name: "creds"}, nil},
		{"vi, pull secret of its namespace", viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeContainerImage,
				ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "r/i", ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "creds"}}}
		}), &types.NamespacedName{Namespace: "ns1", Name: "creds"}, nil},
		{"cvi from a cvi", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.ClusterVirtualImageObjectRef{Kind: "ClusterVirtualImage", Name: "b"}}
		}), nil, &image.ObjectRef{Kind: "ClusterVirtualImage", NamespacedName: types.NamespacedName{Name: "b"}}},
		{"cvi from a vd", cviView(func(c *v1alpha2.ClusterVirtualImage) {
			c.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.ClusterVirtualImageObjectRef{Kind: "VirtualDisk", Namespace: "ns2", Name: "b"}}
		}), nil, &image.ObjectRef{Kind: "VirtualDisk", NamespacedName: types.NamespacedName{Namespace: "ns2", Name: "b"}}},
		{"vi from a cvi", viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: "ClusterVirtualImage", Name: "b"}}
		}), nil, &image.ObjectRef{Kind: "ClusterVirtualImage", NamespacedName: types.NamespacedName{Name: "b"}}},
		{"vi from a vi", viView(func(v *v1alpha2.VirtualImage) {
			v.Spec.DataSource = v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: "VirtualImage", Name: "b"}}
		}), nil, &image.ObjectRef{Kind: "VirtualImage", NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "b"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.img.Source
			if (src.PullSecret == nil) != (tc.wantPullSecret == nil) || (src.PullSecret != nil && *src.PullSecret != *tc.wantPullSecret) {
				t.Errorf("pull secret %v, want %v", src.PullSecret, tc.wantPullSecret)
			}
			if (src.Ref == nil) != (tc.wantRef == nil) || (src.Ref != nil && *src.Ref != *tc.wantRef) {
				t.Errorf("ref %+v, want %+v", src.Ref, tc.wantRef)
			}
		})
	}
}

// The status builders write one set of condition names for both kinds.
func TestConditionNames(t *testing.T) {
	pairs := [][2]string{
		{string(cvicondition.DatasourceReadyType), string(vicondition.DatasourceReadyType)},
		{string(cvicondition.ReadyType), string(vicondition.ReadyType)},
		{string(cvicondition.DatasourceReady), string(vicondition.DatasourceReady)},
		{string(cvicondition.Provisioning), string(vicondition.Provisioning)},
		{string(cvicondition.ProvisioningNotStarted), string(vicondition.ProvisioningNotStarted)},
		{string(cvicondition.ProvisioningFailed), string(vicondition.ProvisioningFailed)},
		{string(cvicondition.Ready), string(vicondition.Ready)},
		{string(cvicondition.ContainerRegistrySecretNotFound), string(vicondition.ContainerRegistrySecretNotFound)},
		{string(cvicondition.ImageNotReady), string(vicondition.ImageNotReady)},
		{string(cvicondition.ClusterImageNotReady), string(vicondition.ClusterImageNotReady)},
		{string(cvicondition.VirtualDiskNotReady), string(vicondition.VirtualDiskNotReady)},
		{string(cvicondition.VirtualDiskAttachedToRunningVM), string(vicondition.VirtualDiskAttachedToRunningVM)},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("cvi %q, vi %q", p[0], p[1])
		}
	}
}
