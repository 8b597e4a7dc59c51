package api

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/testenv"
)

// kubectl explain prints the field descriptions of the types.
func TestKubectlExplain(t *testing.T) {
	env, _ := setup(t)
	cases := []struct {
		path string
		want []string
	}{
		{"vd.spec.dataSource.http", []string{"FIELD: http", "HTTP is the file to download, for type HTTP.", "url\t<string> -required-", "URL of the file", "caBundle\t<string>", "CABundle holds the PEM certificates that the HTTPS server's certificate must chain to, when it is not signed", "checksum\t<Object>", "Checksum of the downloaded file"}},
		{"vd.spec.persistentVolumeClaim.size", []string{"may be increased later (never decreased)"}},
		{"vi.spec.storage", []string{"ContainerRegistry", "PersistentVolumeClaim", "ENUM:", "Storage is where the image is kept"}},
		{"cvi.spec.dataSource.objectRef.namespace", []string{"Namespace of a VirtualImage or VirtualDisk source"}},
		{"vd.status.conditions", []string{"DatasourceReady, Ready, Resizing"}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			out := testenv.Kubectl(t, env.Kubeconfig, "explain", tc.path)
			for _, w := range tc.want {
				// kubectl wraps the descriptions at its terminal width.
				if !strings.Contains(squash(out), squash(w)) {
					t.Errorf("kubectl explain %s lacks %q:\n%s", tc.path, w, out)
				}
			}
		})
	}
}

// squash turns every run of white space into one space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// kubectl get shows the printer columns, the wide ones with -o wide, and the category lists the
// kinds.
func TestKubectlGetColumns(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2()

	vd, err := api.VirtualDisks(ns).Create(ctx, blankDisk(ns, "blank", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vd.Status = v1alpha2.VirtualDiskStatus{
		Phase: v1alpha2.DiskReady, Capacity: "1Gi", Progress: "100%", StorageClassName: "local",
		Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: "vd-blank-pvc"},
	}
	if _, err := api.VirtualDisks(ns).UpdateStatus(ctx, vd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vi, err := api.VirtualImages(ns).Create(ctx, registryImage(ns, "iso", v1alpha2.VirtualImageDataSource{
		Type: v1alpha2.DataSourceTypeHTTP, HTTP: httpSource("https://images.example.com/installer.iso"),
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vi.Status.ImageStatus = v1alpha2.ImageStatus{Phase: v1alpha2.ImageReady, Progress: "100%", CDROM: true, Format: "iso", Size: v1alpha2.ImageStatusSize{Stored: "300Mi", Unpacked: "310Mi"}}
	vi.Status.Target.RegistryURL = "dvcr.d8-virtualization.svc/vi/" + ns + "/iso:latest"
	if _, err := api.VirtualImages(ns).UpdateStatus(ctx, vi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cvi, err := createCVI(t, client, clusterImage(uniqueName("cvi"), v1alpha2.ClusterVirtualImageDataSource{Type: v1alpha2.DataSourceTypeUpload}))
	if err != nil {
		t.Fatal(err)
	}
	cvi.Status.ImageStatus = v1alpha2.ImageStatus{Phase: v1alpha2.ImageWaitForUserUpload}
	cvi.Status.Target.RegistryURL = "dvcr.d8-virtualization.svc/cvi/" + cvi.Name + ":latest"
	if _, err := api.ClusterVirtualImages().UpdateStatus(ctx, cvi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"vd", []string{"get", "vd", "-n", ns}, []string{"NAME", "PHASE", "CAPACITY", "AGE", "blank", "Ready", "1Gi"}},
		{"vd wide", []string{"get", "vd", "-n", ns, "-o", "wide"}, []string{"INUSE", "PROGRESS", "STORAGECLASS", "TARGETPVC", "100%", "local", "vd-blank-pvc"}},
		{"vi", []string{"get", "vi", "-n", ns}, []string{"PHASE", "CDROM", "PROGRESS", "AGE", "iso", "Ready", "true"}},
		{"vi wide", []string{"get", "vi", "-n", ns, "-o", "wide"}, []string{"STOREDSIZE", "UNPACKEDSIZE", "REGISTRY URL", "TARGETPVC", "STORAGECLASS", "300Mi", "310Mi", "/vi/" + ns + "/iso:latest"}},
		{"cvi wide", []string{"get", "cvi", cvi.Name, "-o", "wide"}, []string{"PHASE", "CDROM", "PROGRESS", "STOREDSIZE", "REGISTRY URL", "WaitForUserUpload", "/cvi/" + cvi.Name + ":latest"}},
		{"vd,vi,cvi", []string{"get", "vd,vi,cvi", "-n", ns}, []string{"virtualdisk.virtualization.deckhouse.io/blank", "virtualimage.virtualization.deckhouse.io/iso", "clustervirtualimage.virtualization.deckhouse.io/" + cvi.Name}},
		{"category", []string{"get", "virtualization", "-n", ns}, []string{"virtualdisk.virtualization.deckhouse.io/blank", "virtualimage.virtualization.deckhouse.io/iso"}},
		{"cluster category", []string{"get", "virtualization-cluster"}, []string{cvi.Name, "WaitForUserUpload"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := testenv.Kubectl(t, env.Kubeconfig, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
		})
	}
}
