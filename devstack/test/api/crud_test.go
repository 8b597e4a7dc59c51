package api

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/d8virt/api/client/informers/externalversions"
	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vdcondition"
	"github.com/d8virt/devstack/testenv"
)

// Valid objects of every source type are accepted through the typed clientset, the status
// subresource keeps conditions by type, and the generated informers and listers see the objects.
func TestValidObjects(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2()

	cviName := uniqueName("cvi")
	cvis := []*v1alpha2.ClusterVirtualImage{
		clusterImage(cviName, v1alpha2.ClusterVirtualImageDataSource{
			Type: v1alpha2.DataSourceTypeHTTP,
			HTTP: &v1alpha2.DataSourceHTTP{URL: "https://images.example.com/debian.qcow2", Checksum: &v1alpha2.Checksum{SHA256: sha256Hex}},
		}),
		clusterImage(uniqueName("cvi-from-vi"), v1alpha2.ClusterVirtualImageDataSource{
			Type:      v1alpha2.DataSourceTypeObjectRef,
			ObjectRef: &v1alpha2.ClusterVirtualImageObjectRef{Kind: v1alpha2.VirtualImageKind, Name: "img", Namespace: ns},
		}),
		clusterImage(uniqueName("cvi-registry"), v1alpha2.ClusterVirtualImageDataSource{
			Type: v1alpha2.DataSourceTypeContainerImage,
			ContainerImage: &v1alpha2.DataSourceContainerImage{
				Image:           "registry.example.com/images/debian:12",
				ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "pull", Namespace: ns},
			},
		}),
		clusterImage(uniqueName("cvi-upload"), v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}),
	}
	for _, cvi := range cvis {
		if _, err := createCVI(t, client, cvi); err != nil {
			t.Errorf("create ClusterVirtualImage %s: %v", cvi.Name, err)
		}
	}

	vis := []*v1alpha2.VirtualImage{
		registryImage(ns, "img", v1alpha2.VirtualImageDataSource{Type: v1alpha2.DataSourceTypeHTTP, HTTP: httpSource("http://10.0.0.1/disk.img.gz")}),
		registryImage(ns, "img-from-vd", v1alpha2.VirtualImageDataSource{
			Type:      v1alpha2.DataSourceTypeObjectRef,
			ObjectRef: &v1alpha2.VirtualImageObjectRef{Kind: v1alpha2.VirtualDiskKind, Name: "root"},
		}),
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "img-on-pvc"},
			Spec: v1alpha2.VirtualImageSpec{
				Storage:               v1alpha2.StoragePersistentVolumeClaim,
				PersistentVolumeClaim: &v1alpha2.VirtualImagePersistentVolumeClaim{StorageClassName: ptr.To("local")},
				DataSource: v1alpha2.VirtualImageDataSource{
					Type:           v1alpha2.DataSourceTypeContainerImage,
					ContainerImage: &v1alpha2.DataSourceContainerImage{Image: "registry.example.com/iso/installer:1", ImagePullSecret: &v1alpha2.ImagePullSecret{Name: "pull"}},
				},
			},
		},
	}
	for _, vi := range vis {
		if _, err := api.VirtualImages(ns).Create(ctx, vi, metav1.CreateOptions{}); err != nil {
			t.Errorf("create VirtualImage %s: %v", vi.Name, err)
		}
	}

	vds := []*v1alpha2.VirtualDisk{
		blankDisk(ns, "blank", "1Gi"),
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root"},
			Spec: v1alpha2.VirtualDiskSpec{
				DataSource: &v1alpha2.VirtualDiskDataSource{
					Type:      v1alpha2.DataSourceTypeObjectRef,
					ObjectRef: &v1alpha2.VirtualDiskObjectRef{Kind: v1alpha2.ClusterVirtualImageKind, Name: cviName},
				},
				PersistentVolumeClaim: v1alpha2.VirtualDiskPersistentVolumeClaim{StorageClassName: ptr.To("local"), Size: qty("10Gi")},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "uploaded"},
			Spec:       v1alpha2.VirtualDiskSpec{DataSource: &v1alpha2.VirtualDiskDataSource{Type: v1alpha2.DataSourceTypeUpload}},
		},
	}
	for _, vd := range vds {
		if _, err := api.VirtualDisks(ns).Create(ctx, vd, metav1.CreateOptions{}); err != nil {
			t.Errorf("create VirtualDisk %s: %v", vd.Name, err)
		}
	}
	if t.Failed() {
		return
	}

	// The status subresource: conditions are a map keyed by type, and the spec is left alone.
	vd, err := api.VirtualDisks(ns).Get(ctx, "root", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	vd.Status = v1alpha2.VirtualDiskStatus{
		Phase:    v1alpha2.DiskProvisioning,
		Progress: "12.5%",
		Target:   v1alpha2.DiskTarget{PersistentVolumeClaimName: "vd-root-1234"},
		Conditions: []metav1.Condition{
			{Type: string(vdcondition.DatasourceReadyType), Status: metav1.ConditionTrue, Reason: string(vdcondition.DatasourceReady), LastTransitionTime: now},
			{Type: string(vdcondition.ReadyType), Status: metav1.ConditionFalse, Reason: string(vdcondition.Provisioning), LastTransitionTime: now},
		},
		ObservedGeneration: vd.Generation,
	}
	vd.Spec.PersistentVolumeClaim.Size = qty("20Gi")
	got, err := api.VirtualDisks(ns).UpdateStatus(ctx, vd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if got.Status.Phase != v1alpha2.DiskProvisioning || len(got.Status.Conditions) != 2 || got.Status.Target.PersistentVolumeClaimName != "vd-root-1234" {
		t.Errorf("status after UpdateStatus: %+v", got.Status)
	}
	if got.Spec.PersistentVolumeClaim.Size.String() != "10Gi" {
		t.Errorf("UpdateStatus changed the spec: size %s", got.Spec.PersistentVolumeClaim.Size)
	}
	got.Status.Conditions = append(got.Status.Conditions, got.Status.Conditions[0])
	if _, err := api.VirtualDisks(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err == nil {
		t.Error("two conditions of one type were accepted: conditions must be a map keyed by type")
	}

	// The generated informers and listers.
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	vdInformer := factory.Virtualization().V1alpha2().VirtualDisks()
	viInformer := factory.Virtualization().V1alpha2().VirtualImages()
	// Informer() registers each informer with the factory, which starts only those registered.
	synced := []cache.InformerSynced{vdInformer.Informer().HasSynced, viInformer.Informer().HasSynced}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("informers did not sync")
	}
	disks, err := vdInformer.Lister().VirtualDisks(ns).List(labels.Everything())
	if err != nil || len(disks) != len(vds) {
		t.Errorf("lister: %d disks (%v), want %d", len(disks), err, len(vds))
	}
	if img, err := viInformer.Lister().VirtualImages(ns).Get("img-on-pvc"); err != nil || img.Spec.Storage != v1alpha2.StoragePersistentVolumeClaim {
		t.Errorf("lister get img-on-pvc: %v %v", img, err)
	}
}

const sha256Hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
