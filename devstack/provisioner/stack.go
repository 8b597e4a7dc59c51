package provisioner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/provisioner/hostvol"
)

// ClassName is the local stack's default StorageClass.
const ClassName = "local"

// Daemon is the provisioner's name among a stack's daemons (pid file, log).
const Daemon = "local-provisioner"

// VolumesDir is where a stack keeps its volumes.
func VolumesDir(s *controlplane.Stack) string { return filepath.Join(s.Config().StateDir, "volumes") }

// StackComponent runs bin (local-provisioner) as a daemon of the stack, with the admin's
// credentials; it is ready once the default StorageClass is there.
func StackComponent(s *controlplane.Stack, bin string) controlplane.Component {
	return controlplane.Component{
		Name: Daemon,
		Bin:  bin,
		Args: []string{"--kubeconfig", s.KubeconfigPath(), "--volumes-dir", VolumesDir(s), "--storage-class", ClassName},
		Ready: func(ctx context.Context) error {
			cfg, err := s.RESTConfig()
			if err != nil {
				return err
			}
			cfg.Timeout = 5 * time.Second
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			if _, err := kube.StorageV1().StorageClasses().Get(ctx, ClassName, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("storageclass %s: %w", ClassName, err)
			}
			return nil
		},
	}
}

// ReleaseVolumes unmounts and detaches every volume of a stack whose provisioner stopped, keeping
// the data (`devcluster down`); a stack without volumes has nothing to release.
func ReleaseVolumes(ctx context.Context, s *controlplane.Stack) error {
	if _, err := os.Stat(VolumesDir(s)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	store, err := hostvol.New(VolumesDir(s), hostvol.Exec{})
	if err != nil {
		return err
	}
	return store.ReleaseAll(ctx)
}
