package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"runtime"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/api/client/clientset/versioned"
	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/testenv"
)

// setup installs the friendly CRDs and returns the stack and a typed client.
func setup(t *testing.T) (*testenv.Env, versioned.Interface) {
	t.Helper()
	env := testenv.Get(t)
	crds, err := filepath.Glob(filepath.Join(repoRoot(t), "crds", "virtualization.deckhouse.io", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no friendly CRDs (%v): run make generate", err)
	}
	env.InstallCRDFiles(t, crds...)
	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return env, client
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// uniqueName is a name with a random suffix, for cluster-scoped objects on a shared stack.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// createCVI creates a ClusterVirtualImage and deletes it when the test ends.
func createCVI(t *testing.T, client versioned.Interface, cvi *v1alpha2.ClusterVirtualImage) (*v1alpha2.ClusterVirtualImage, error) {
	t.Helper()
	got, err := client.VirtualizationV1alpha2().ClusterVirtualImages().Create(testenv.Context(t), cvi, metav1.CreateOptions{})
	if err == nil {
		t.Cleanup(func() {
			err := client.VirtualizationV1alpha2().ClusterVirtualImages().Delete(context.Background(), got.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete ClusterVirtualImage %s: %v", got.Name, err)
			}
		})
	}
	return got, err
}

func httpSource(url string) *v1alpha2.DataSourceHTTP {
	return &v1alpha2.DataSourceHTTP{URL: url}
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func blankDisk(ns, name, size string) *v1alpha2.VirtualDisk {
	return &v1alpha2.VirtualDisk{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.VirtualDiskSpec{
			PersistentVolumeClaim: v1alpha2.VirtualDiskPersistentVolumeClaim{Size: qty(size)},
		},
	}
}

func registryImage(ns, name string, src v1alpha2.VirtualImageDataSource) *v1alpha2.VirtualImage {
	return &v1alpha2.VirtualImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha2.VirtualImageSpec{Storage: v1alpha2.StorageContainerRegistry, DataSource: src},
	}
}

func clusterImage(name string, src v1alpha2.ClusterVirtualImageDataSource) *v1alpha2.ClusterVirtualImage {
	return &v1alpha2.ClusterVirtualImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha2.ClusterVirtualImageSpec{DataSource: src},
	}
}
