package api

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/testenv"
)

// denial is what an invalid object must be refused with: a cause on field whose message contains
// message.
type denial struct {
	field, message string
}

// assertDenied checks that err is an Invalid Status with a cause for each wanted denial.
func assertDenied(t *testing.T, err error, want ...denial) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a denial on %v", want)
	}
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) || status.ErrStatus.Details == nil {
		t.Fatalf("want an Invalid Status with causes, got %v", err)
	}
	for _, w := range want {
		found := false
		for _, c := range status.ErrStatus.Details.Causes {
			if c.Field == w.field && strings.Contains(c.Message, w.message) {
				found = true
			}
		}
		if !found {
			t.Errorf("no cause on %s with %q in %v", w.field, w.message, status.ErrStatus.Details.Causes)
		}
	}
	if !strings.Contains(err.Error(), want[0].field) {
		t.Errorf("the error does not name the field %s: %v", want[0].field, err)
	}
}

// Objects that break a rule of the schema are refused with a message that names the field.
func TestCreateDenials(t *testing.T) {
	env, client := setup(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2()
	url := httpSource("https://images.example.com/disk.qcow2")
	image := &v1alpha2.DataSourceContainerImage{Image: "registry.example.com/disk:1"}

	cases := []struct {
		name   string
		create func() error
		want   []denial
	}{{
		name: "vd two payloads",
		create: func() error {
			_, err := api.VirtualDisks(ns).Create(testenv.Context(t), &v1alpha2.VirtualDisk{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two"},
				Spec:       v1alpha2.VirtualDiskSpec{DataSource: &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: url, ContainerImage: image}},
			}, metav1.CreateOptions{})
			return err
		},
		want: []denial{{"spec.dataSource.containerImage", "spec.dataSource.containerImage must be set when, and only when, spec.dataSource.type is ContainerImage"}},
	}, {
		name: "vd payload of another type",
		create: func() error {
			_, err := api.VirtualDisks(ns).Create(testenv.Context(t), &v1alpha2.VirtualDisk{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong"},
				Spec: v1alpha2.VirtualDiskSpec{DataSource: &v1alpha2.VirtualDiskDataSource{
					Type: v1alpha2.DataSourceTypeHTTP, ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualImageKind, Name: "x"},
				}},
			}, metav1.CreateOptions{})
			return err
		},
		want: []denial{
			{"spec.dataSource.http", "spec.dataSource.http must be set when, and only when, spec.dataSource.type is HTTP"},
			{"spec.dataSource.objectRef", "spec.dataSource.objectRef must be set when, and only when, spec.dataSource.type is ObjectRef"},
		},
	}, {
		name: "vd upload with a payload",
		create: func() error {
			_, err := api.VirtualDisks(ns).Create(testenv.Context(t), &v1alpha2.VirtualDisk{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upload"},
				Spec:       v1alpha2.VirtualDiskSpec{DataSource: &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeUpload, HTTP: url}},
			}, metav1.CreateOptions{})
			return err
		},
		want: []denial{{"spec.dataSource.http", "spec.dataSource.http must be set when, and only when"}},
	}, {
		name: "vd pull secret of another namespace",
		create: func() error {
			_, err := api.VirtualDisks(ns).Create(testenv.Context(t), &v1alpha2.VirtualDisk{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret"},
				Spec: v1alpha2.VirtualDiskSpec{DataSource: &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeContainerImage, ContainerImage: &v1alpha2.DataSourceContainerImage{
					Image: "registry.example.com/disk:1", ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "pull", Namespace: "other"},
				}}},
			}, metav1.CreateOptions{})
			return err
		},
		want: []denial{{"spec.dataSource.containerImage.imagePullSecret.namespace", "is not allowed"}},
	}, {
		name: "vd bad checksum",
		create: func() error {
			_, err := api.VirtualDisks(ns).Create(testenv.Context(t), &v1alpha2.VirtualDisk{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checksum"},
				Spec: v1alpha2.VirtualDiskSpec{DataSource: &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: &v1alpha2.DataSourceHTTP{
					URL: url.URL, Checksum: &v1alpha2.Checksum{SHA256: "abc"},
				}}},
			}, metav1.CreateOptions{})
			return err
		},
		want: []denial{{"spec.dataSource.http.checksum.sha256", "should match"}},
	}, {
		name: "vi pvc settings for the registry",
		create: func() error {
			vi := registryImage(ns, "pvc", v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: url})
			vi.Spec.PersistentVolumeClaim = &v1alpha2.VirtualImagePersistentVolumeClaim{StorageClassName: ptr.To("local")}
			_, err := api.VirtualImages(ns).Create(testenv.Context(t), vi, metav1.CreateOptions{})
			return err
		},
		want: []denial{{"spec.persistentVolumeClaim", "spec.persistentVolumeClaim is only allowed when spec.storage is PersistentVolumeClaim"}},
	}, {
		name: "vi two payloads",
		create: func() error {
			_, err := api.VirtualImages(ns).Create(testenv.Context(t), registryImage(ns, "two", v1alpha2.VirtualImageDataSource{
				Type: v1alpha2.DataSourceTypeContainerImage, HTTP: url, ContainerImage: image,
			}), metav1.CreateOptions{})
			return err
		},
		want: []denial{{"spec.dataSource.http", "spec.dataSource.http must be set when, and only when, spec.dataSource.type is HTTP"}},
	}, {
		name: "cvi objectRef to a namespaced image without namespace",
		create: func() error {
			_, err := createCVI(t, client, clusterImage(uniqueName("cvi-ref"), v1alpha2.ClusterVirtualImageDataSource{
				Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.ClusterVirtualImageObjectRef{Kind: v1alpha2.VirtualDiskKind, Name: "root"},
			}))
			return err
		},
		want: []denial{{"spec.dataSource.objectRef.namespace", "spec.dataSource.objectRef.namespace is required for a VirtualImage or VirtualDisk"}},
	}, {
		name: "cvi pull secret without namespace",
		create: func() error {
			_, err := createCVI(t, client, clusterImage(uniqueName("cvi-secret"), v1alpha2.ClusterVirtualImageDataSource{
				Type: v1alpha2.DataSourceTypeContainerImage, ContainerImage: &v1alpha2.DataSourceContainerImage{Image: image.Image, ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "pull"}},
			}))
			return err
		},
		want: []denial{{"spec.dataSource.containerImage.imagePullSecret.namespace", "is required for a ClusterVirtualImage"}},
	}, {
		name: "cvi unknown source type",
		create: func() error {
			_, err := createCVI(t, client, clusterImage(uniqueName("cvi-type"), v1alpha2.ClusterVirtualImageDataSource{Type: "FTP"}))
			return err
		},
		want: []denial{{"spec.dataSource.type", `supported values: "HTTP", "ContainerImage", "ObjectRef", "Upload"`}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertDenied(t, tc.create(), tc.want...)
		})
	}
}

// Images are immutable after creation; of a disk, only persistentVolumeClaim.size may change, and
// only grow.
func TestUpdateDenials(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2()

	vi, err := api.VirtualImages(ns).Create(ctx, registryImage(ns, "img", v1alpha2.VirtualImageDataSource{
		Type: v1alpha2.DataSourceTypeHTTP, HTTP: httpSource("https://images.example.com/a.qcow2"),
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cvi, err := createCVI(t, client, clusterImage(uniqueName("cvi"), v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}))
	if err != nil {
		t.Fatal(err)
	}
	vd, err := api.VirtualDisks(ns).Create(ctx, &v1alpha2.VirtualDisk{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "disk"},
		Spec: v1alpha2.VirtualDiskSpec{
			DataSource:            &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeObjectRef, ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.VirtualImageKind, Name: "img"}},
			PersistentVolumeClaim: v1alpha2.VirtualDiskPersistentVolumeClaim{Size: qty("10Gi")},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("vi spec", func(t *testing.T) {
		changed := vi.DeepCopy()
		changed.Spec.DataSource.HTTP.URL = "https://images.example.com/b.qcow2"
		_, err := api.VirtualImages(ns).Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec", "spec is immutable: a VirtualImage's spec cannot change after creation"})
	})
	t.Run("cvi spec", func(t *testing.T) {
		changed := cvi.DeepCopy()
		changed.Spec.DataSource = v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: httpSource("https://images.example.com/c.qcow2")}
		_, err := api.ClusterVirtualImages().Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec", "spec is immutable: a ClusterVirtualImage's spec cannot change after creation"})
	})
	t.Run("vd shrink", func(t *testing.T) {
		changed := vd.DeepCopy()
		changed.Spec.PersistentVolumeClaim.Size = qty("5Gi")
		_, err := api.VirtualDisks(ns).Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec.persistentVolumeClaim.size", "spec.persistentVolumeClaim.size may only grow"})
	})
	t.Run("vd size removed", func(t *testing.T) {
		changed := vd.DeepCopy()
		changed.Spec.PersistentVolumeClaim.Size = nil
		_, err := api.VirtualDisks(ns).Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec.persistentVolumeClaim.size", "cannot be removed"})
	})
	t.Run("vd storage class", func(t *testing.T) {
		changed := vd.DeepCopy()
		changed.Spec.PersistentVolumeClaim.StorageClassName = ptr.To("other")
		_, err := api.VirtualDisks(ns).Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec.persistentVolumeClaim.storageClassName", "spec.persistentVolumeClaim.storageClassName is immutable"})
	})
	t.Run("vd data source", func(t *testing.T) {
		changed := vd.DeepCopy()
		changed.Spec.DataSource.ObjectRef.Name = "other"
		_, err := api.VirtualDisks(ns).Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec.dataSource", "spec.dataSource is immutable"})
	})
	t.Run("vd data source removed", func(t *testing.T) {
		changed := vd.DeepCopy()
		changed.Spec.DataSource = nil
		_, err := api.VirtualDisks(ns).Update(ctx, changed, metav1.UpdateOptions{})
		assertDenied(t, err, denial{"spec.dataSource", "spec.dataSource is immutable"})
	})
	// Growing is allowed, written as a quantity in another unit too.
	t.Run("vd grow", func(t *testing.T) {
		changed := vd.DeepCopy()
		changed.Spec.PersistentVolumeClaim.Size = qty("20480Mi")
		got, err := api.VirtualDisks(ns).Update(ctx, changed, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("grow: %v", err)
		}
		if got.Spec.PersistentVolumeClaim.Size.Cmp(*qty("20Gi")) != 0 {
			t.Errorf("size after growing: %s", got.Spec.PersistentVolumeClaim.Size)
		}
	})
	// Labels and annotations still change on an image.
	t.Run("vi metadata", func(t *testing.T) {
		fresh, err := api.VirtualImages(ns).Get(ctx, vi.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fresh.Labels = map[string]string{"team": "a"}
		if _, err := api.VirtualImages(ns).Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
			t.Errorf("label an image: %v", err)
		}
	})
}
