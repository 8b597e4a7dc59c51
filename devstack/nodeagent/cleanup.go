package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/proc"
)

// CleanupNode removes every pod a stopped agent left under root: SIGTERM to each container's
// process group, SIGKILL after grace, then the pods' mounts, network namespaces and directories.
// It refuses while the node's agent runs, and keeps an agent from starting until it is done.
func CleanupNode(root string, n localnet.Net, grace time.Duration) error {
	l := Layout{Root: root}
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	release, err := nodeIdle(root)
	if err != nil {
		return err
	}
	defer release()
	entries, err := os.ReadDir(l.PodsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var uids []types.UID
	var procs []RunningInfo
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		uids = append(uids, uid)
		ctrs, _ := os.ReadDir(filepath.Join(l.PodDir(uid), "containers"))
		for _, c := range ctrs {
			var ri RunningInfo
			if readJSON(filepath.Join(l.PodDir(uid), "containers", c.Name(), runningFile), &ri) == nil &&
				(ri.process().Alive() || ri.shim().Alive()) {
				procs = append(procs, ri)
			}
		}
	}
	signalAll := func(sig syscall.Signal) error {
		for _, ri := range procs {
			if ri.process().Alive() {
				_ = syscall.Kill(-ri.Pid, sig)
			}
		}
		return nil
	}
	anyAlive := func() bool {
		for _, ri := range procs {
			if ri.process().Alive() || ri.shim().Alive() {
				return true
			}
		}
		return false
	}
	if _, err := proc.Terminate(signalAll, anyAlive, grace, 10*time.Second); err != nil {
		return fmt.Errorf("processes of pods under %s %w", root, err)
	}
	var errs []error
	for _, uid := range uids {
		errs = append(errs, unmountUnder(l.PodDir(uid)), n.DeleteHost(NetHostName(uid)), os.RemoveAll(l.PodDir(uid)))
	}
	return errors.Join(errs...)
}
