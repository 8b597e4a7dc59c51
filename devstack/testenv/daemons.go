package testenv

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/svcproxy"
)

// ClusterDaemonPackages are the packages of the stack daemons AddClusterDaemons runs, relative
// to the repository root; `go build -o BIN/` of them gives AddClusterDaemons its binaries.
var ClusterDaemonPackages = []string{"./devstack/cmd/" + svcproxy.Daemon, "./devstack/cmd/" + provisioner.Daemon}

// AddClusterDaemons gives a private stack what a cluster gives, as `devcluster up` does: the
// service proxy (Services and cluster DNS) and the local provisioner (the default StorageClass),
// run from the binaries in bin. Add them before any node agent: an agent learns the cluster DNS
// when it starts.
func AddClusterDaemons(s *controlplane.Stack, bin string) {
	s.AddComponents(svcproxy.StackComponent(s, filepath.Join(bin, svcproxy.Daemon)),
		provisioner.StackComponent(s, filepath.Join(bin, provisioner.Daemon)))
}

// ReleaseClusterDaemons stops every daemon of a stack made with AddClusterDaemons and then
// releases the provisioner's volumes (unmounts and detaches them). Whatever used the volumes
// (the nodes' pods) must be gone by then.
func ReleaseClusterDaemons(ctx context.Context, s *controlplane.Stack) error {
	return errors.Join(s.Down(false), provisioner.ReleaseVolumes(ctx, s))
}
