package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/d8virt/devstack/proc"
)

// The agent runs every container attempt through two hidden subcommands of its own binary:
//
//	node-agent container-shim <container dir>   supervises one attempt; outlives the agent
//	node-agent container-init <init.json>       sets up namespaces and mounts, then execs the program
//
// The shim is a session of its own, so restarting or stopping the agent leaves containers alone. It
// is a child subreaper: processes the container daemonizes stay its descendants, and when the
// container's main process exits they are killed, as a pid namespace would kill them. It records
// the attempt in running.json and its outcome in exit.json, which is how an agent that restarted
// in between learns exit codes.
const (
	ShimCommand = "container-shim"
	InitCommand = "container-init"
)

// InitSpec tells container-init what to run and how.
type InitSpec struct {
	Path     string   `json:"path"`
	Argv     []string `json:"argv"`
	Env      []string `json:"env"`
	Dir      string   `json:"dir,omitempty"`
	Hostname string   `json:"hostname"`
	// NetNS is the network namespace file to enter (/run/netns/...); empty stays in the host's.
	NetNS  string  `json:"netns,omitempty"`
	Mounts []Mount `json:"mounts"`
	// PrivateDev gives the container a /dev of its own (privateDev), for its volumeDevices.
	PrivateDev bool   `json:"privateDev,omitempty"`
	LogFile    string `json:"logFile"`
	Attempt    int    `json:"attempt"`
}

// Mount is one bind mount inside the container's mount namespace.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// HostToContainer makes the mount a slave of the host's (kubelet's HostToContainer): mounts
	// made later below the source on the node show in the container. Without it the mount is
	// private, as kubelet's default (None) is.
	HostToContainer bool `json:"hostToContainer,omitempty"`
}

// RunningInfo is what the shim records once the attempt's process exists.
type RunningInfo struct {
	Attempt        int       `json:"attempt"`
	Pid            int       `json:"pid"`
	StartTicks     uint64    `json:"startTicks"`
	ShimPid        int       `json:"shimPid"`
	ShimStartTicks uint64    `json:"shimStartTicks"`
	StartedAt      time.Time `json:"startedAt"`
}

// ExitInfo is an attempt's outcome.
type ExitInfo struct {
	Attempt    int       `json:"attempt"`
	ExitCode   int32     `json:"exitCode"`
	Signal     int32     `json:"signal,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// StartError is set when the program could not be started at all.
	StartError string `json:"startError,omitempty"`
	// Reason and Message override the defaults (Completed/Error and the termination log).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Files of a container directory.
const (
	initFile       = "init.json"
	runningFile    = "running.json"
	exitFile       = "exit.json"
	startErrorFile = "start-error"
	termLogFile    = "termination-log"
	recordFile     = "record.json"
	rootfsDir      = "rootfs"
)

// startErrorExitCode is what a container that never started exits with (as containerd reports it).
const startErrorExitCode = 128

// RunSubcommand runs the hidden subcommands and reports whether args named one; the node agent's
// main calls it first.
func RunSubcommand(args []string) (handled bool, code int) {
	if len(args) < 2 {
		return false, 0
	}
	switch args[0] {
	case ShimCommand:
		return true, runShim(args[1])
	case InitCommand:
		return true, runInit(args[1])
	}
	return false, 0
}

func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(p, b, 0o644)
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// process is the attempt's program, shim its supervisor.
func (ri RunningInfo) process() proc.Identity {
	return proc.Identity{Pid: ri.Pid, StartTicks: ri.StartTicks}
}

func (ri RunningInfo) shim() proc.Identity {
	return proc.Identity{Pid: ri.ShimPid, StartTicks: ri.ShimStartTicks}
}

// runShim supervises one container attempt; see the comment on ShimCommand.
func runShim(ctrDir string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node-agent container-shim:", err)
		return 1
	}
	var spec InitSpec
	if err := readJSON(filepath.Join(ctrDir, initFile), &spec); err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("become subreaper: %w", err))
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	sigc := make(chan os.Signal, 64)
	signal.Notify(sigc, syscall.SIGCHLD)

	started := time.Now()
	exitInfo := ExitInfo{Attempt: spec.Attempt, StartedAt: started}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"node-agent", InitCommand, filepath.Join(ctrDir, initFile)}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{devnull.Fd(), logf.Fd(), logf.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		exitInfo.ExitCode = startErrorExitCode
		exitInfo.StartError = err.Error()
		exitInfo.FinishedAt = time.Now()
		if werr := writeJSON(filepath.Join(ctrDir, exitFile), exitInfo); werr != nil {
			return fail(werr)
		}
		return 0
	}
	devnull.Close()
	self, _ := proc.Identify(os.Getpid())
	child, _ := proc.Identify(pid)
	_ = writeJSON(filepath.Join(ctrDir, runningFile), RunningInfo{
		Attempt: spec.Attempt, Pid: pid, StartTicks: child.StartTicks,
		ShimPid: os.Getpid(), ShimStartTicks: self.StartTicks, StartedAt: started,
	})

	var status syscall.WaitStatus
	for done := false; !done; {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
			if p == pid {
				status, done = ws, true
			}
		}
		if !done {
			select {
			case <-sigc:
			case <-time.After(time.Second):
			}
		}
	}
	exitInfo.FinishedAt = time.Now()
	killDescendants()

	switch {
	case status.Exited():
		exitInfo.ExitCode = int32(status.ExitStatus())
	case status.Signaled():
		exitInfo.Signal = int32(status.Signal())
		exitInfo.ExitCode = 128 + int32(status.Signal())
	}
	if b, err := os.ReadFile(filepath.Join(ctrDir, startErrorFile)); err == nil {
		exitInfo.StartError = strings.TrimSpace(string(b))
	}
	if err := writeJSON(filepath.Join(ctrDir, exitFile), exitInfo); err != nil {
		return fail(err)
	}
	return 0
}

// killDescendants kills every process left below the shim and reaps it, until none is left.
func killDescendants() {
	self := os.Getpid()
	for round := 0; round < 50; round++ {
		pids := descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err != nil && errors.Is(err, syscall.ECHILD) {
				break
			}
			if p <= 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// descendants lists the processes below pid, from the parent links in /proc.
func descendants(pid int) []int {
	all, err := proc.List()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, p := range all {
		st, err := proc.ReadStat(p)
		if err != nil || st.Exited() {
			continue // zombies are reaped by their parent or, once it is gone, by the shim
		}
		children[st.Parent] = append(children[st.Parent], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// runInit becomes the container: private mount and UTS namespaces with the pod's mounts and
// hostname, the pod's network namespace, then exec.
func runInit(specPath string) int {
	runtime.LockOSThread()
	ctrDir := filepath.Dir(specPath)
	// The container directory may sit below a directory that gets a private mount (a root dir
	// in /tmp), so it is opened before anything is mounted.
	dirFd, dirErr := unix.Open(ctrDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node-agent container-init:", err)
		if dirErr == nil {
			if fd, err2 := unix.Openat(dirFd, startErrorFile, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644); err2 == nil {
				_, _ = unix.Write(fd, []byte(err.Error()))
				unix.Close(fd)
			}
		}
		return startErrorExitCode
	}
	var spec InitSpec
	if err := readJSON(specPath, &spec); err != nil {
		return fail(err)
	}
	var netns *os.File
	if spec.NetNS != "" {
		f, err := os.Open(spec.NetNS)
		if err != nil {
			return fail(fmt.Errorf("open network namespace: %w", err))
		}
		netns = f
	}
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWUTS); err != nil {
		return fail(fmt.Errorf("unshare: %w", err))
	}
	// Slave, not private: a bind of a slave mount is a slave too, which HostToContainer mounts
	// need; every other mount is made private right after it is bound (bindMount).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fail(fmt.Errorf("make / slave: %w", err))
	}
	exeFd, exeErr := unix.Open(spec.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	// Every mount source is opened before anything is mounted, and mounted through /proc/self/fd,
	// so that a private directory mounted earlier never hides the source of a later one. (After
	// the unshare: the source of a bind mount must be in the caller's mount namespace.)
	mounts := SortMounts(spec.Mounts)
	sources := make([]mountSource, len(mounts))
	for i, m := range mounts {
		src, err := openSource(m.Source)
		if err != nil {
			return fail(fmt.Errorf("mount %s: %w", m.Target, err))
		}
		sources[i] = src
	}
	if spec.PrivateDev {
		if err := privateDev(); err != nil {
			return fail(err)
		}
	}
	for i, m := range mounts {
		if err := bindMount(m, sources[i]); err != nil {
			return fail(err)
		}
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fail(fmt.Errorf("set hostname: %w", err))
		}
	}
	if netns != nil {
		if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fail(fmt.Errorf("enter network namespace %s: %w", spec.NetNS, err))
		}
		netns.Close()
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.Chdir(dir); err != nil {
		return fail(fmt.Errorf("working directory: %w", err))
	}
	err := syscall.Exec(spec.Path, spec.Argv, spec.Env)
	if errors.Is(err, syscall.ENOENT) && exeErr == nil {
		// The program lives below a private directory (a bin dir in /tmp): run it through the
		// descriptor opened before the mounts.
		err = syscall.Exec("/proc/self/fd/"+strconv.Itoa(exeFd), spec.Argv, spec.Env)
	}
	return fail(fmt.Errorf("exec %s: %w", spec.Path, err))
}

// SortMounts orders mounts so that a mount inside another one's target comes after it (by the
// number of path elements of the target, stable otherwise), as container runtimes do.
func SortMounts(ms []Mount) []Mount {
	out := append([]Mount{}, ms...)
	depth := func(p string) int { return strings.Count(filepath.Clean(p), "/") }
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].Target) < depth(out[j].Target) })
	return out
}

// mountSource is a mount source held open by an O_PATH descriptor.
type mountSource struct {
	path  string // /proc/self/fd/N
	isDir bool
}

func openSource(p string) (mountSource, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return mountSource{}, fmt.Errorf("open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return mountSource{}, fmt.Errorf("stat %s: %w", p, err)
	}
	return mountSource{path: "/proc/self/fd/" + strconv.Itoa(fd), isDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, nil
}

func bindMount(m Mount, src mountSource) error {
	if src.isDir {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(m.Target), 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
		if _, err := os.Stat(m.Target); errors.Is(err, os.ErrNotExist) {
			f, err := os.OpenFile(m.Target, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("mount point %s: %w", m.Target, err)
			}
			f.Close()
		}
	}
	if err := unix.Mount(src.path, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
	}
	if !m.HostToContainer {
		if err := unix.Mount("", m.Target, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make %s private: %w", m.Target, err)
		}
	}
	if !m.ReadOnly {
		return nil
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, m.Target, unix.AT_RECURSIVE, attr); err == nil {
		return nil
	}
	if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", m.Target, err)
	}
	return nil
}
