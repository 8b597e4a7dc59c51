// Package proc is what the stack knows about processes on this machine, read from /proc: whether
// a pid still runs, which process a pid names (its start time defeats pid reuse), pid files, and
// stopping a process with SIGTERM and, after a grace period, SIGKILL.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// List returns the pid of every process on the machine (in this pid namespace).
func List() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Stat is what the stack reads from /proc/PID/stat.
type Stat struct {
	// State is the process state letter (field 3): R, S, D, Z, X, ...
	State byte
	// Parent is the parent's pid (field 4).
	Parent int
	// StartTicks is the start time in clock ticks since boot (field 22).
	StartTicks uint64
}

// Exited tells a zombie (exited, not reaped yet) or a dead task.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads the stat of pid's main thread.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(b)
}

// parseStat parses a stat line. The fields follow the command name in parentheses, which may
// itself contain spaces and ')', so they are counted from the last ')'.
func parseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3, so field N is f[N-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, errors.New("short stat")
	}
	parent, err := strconv.Atoi(f[1])
	if err != nil {
		return Stat{}, fmt.Errorf("stat parent: %w", err)
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("stat start time: %w", err)
	}
	return Stat{State: f[0][0], Parent: parent, StartTicks: ticks}, nil
}

// Alive tells whether any thread of pid still runs. The main thread alone is not enough: a
// daemon's main thread may exit before its workers do (libvirtd's does), and its zombie would make
// the process look gone while it still holds sockets and files. A process whose threads have all
// exited is gone even if nobody reaps it (a container's PID 1 may not).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/stat")
		if err != nil {
			continue
		}
		if st, err := parseStat(b); err != nil || !st.Exited() {
			return true
		}
	}
	return false
}

// Identity names one process unambiguously: a pid the kernel hands out again later belongs to a
// process with another start time.
type Identity struct {
	Pid        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks"`
}

// Identify returns the identity of the process pid runs now; an error if none runs.
func Identify(pid int) (Identity, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Identity{}, err
	}
	if !Alive(pid) {
		return Identity{}, fmt.Errorf("process %d has exited", pid)
	}
	return Identity{Pid: pid, StartTicks: st.StartTicks}, nil
}

// Alive tells whether the process still runs under its pid.
func (id Identity) Alive() bool {
	if id.Pid <= 0 {
		return false
	}
	st, err := ReadStat(id.Pid)
	return err == nil && st.StartTicks == id.StartTicks && Alive(id.Pid)
}

// Exe is the executable pid runs, without the " (deleted)" the kernel adds once the file was
// replaced. Unlike the command line it is set already while the kernel is loading the binary.
func Exe(pid int) (string, error) {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return strings.TrimSuffix(exe, " (deleted)"), err
}

// Comm is pid's command name, as the kernel shortens it.
func Comm(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b)), err
}

// Namespace names pid's namespace of a kind ("mnt", "net", ...) as the kernel does
// ("mnt:[4026531841]"): two processes share the namespace when the names are equal.
func Namespace(pid int, kind string) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + kind)
}

// InNamespace lists the processes in the namespace of a kind that Namespace named ns.
func InNamespace(kind, ns string) ([]int, error) {
	all, err := List()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range all {
		if got, err := Namespace(pid, kind); err == nil && got == ns {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
