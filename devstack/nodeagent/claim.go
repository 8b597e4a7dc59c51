package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/d8virt/devstack/filelock"
	"github.com/d8virt/devstack/proc"
)

// agentLockFile, in a node's root directory, is locked by the node's agent for as long as it
// runs (the kernel drops the lock when the agent dies) and holds the agent's proc.Record. Two
// agents for one node would fight over its Lease and its pods, and a cleanup would kill the pods
// of a live agent; the lock lets neither happen, whichever checkout starts them.
const agentLockFile = "agent.lock"

// claimNode makes the calling process the only agent of the node rooted at root, until release.
// It fails at once, naming the live agent, when another process holds the node.
func claimNode(root, node string) (release func(), err error) {
	path := filepath.Join(root, agentLockFile)
	f, unlock, err := filelock.TryLock(path)
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("node %s already has a live agent (%s): stop it first, e.g. devcluster node down %s: %w", node, holder(path), node, err)
	}
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		unlock()
		return nil, fmt.Errorf("claim node %s: %w", node, err)
	}
	rec, err := proc.Start(os.Getpid(), exe)
	if err == nil {
		err = writeLocked(f, rec)
	}
	if err != nil {
		unlock()
		return nil, fmt.Errorf("claim node %s: %w", node, err)
	}
	return unlock, nil
}

// writeLocked writes the record into the lock file in place: replacing the file would replace
// what is locked.
func writeLocked(f *os.File, rec proc.Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(append(b, '\n'), 0)
	return err
}

// holder describes the agent that holds the lock at path.
func holder(path string) string {
	rec, err := proc.ReadRecord(path)
	if err != nil {
		return "its record: " + err.Error()
	}
	return fmt.Sprintf("pid %d, started from %s, lock %s", rec.Pid, rec.Bin, path)
}

// nodeIdle holds the node rooted at root while no agent runs, for a cleanup that must not race
// an agent; an error says that an agent holds it.
func nodeIdle(root string) (release func(), err error) {
	path := filepath.Join(root, agentLockFile)
	_, unlock, err := filelock.TryLock(path)
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("the agent of %s still runs (%s): %w", root, holder(path), err)
	}
	return unlock, err
}

// Claimant is the record of the agent that claimed the node rooted at root last; whether it
// still runs is the record's to tell.
func Claimant(root string) (proc.Record, error) {
	return proc.ReadRecord(filepath.Join(root, agentLockFile))
}
