package nodeagent

import (
	"encoding/json"
	"os"
	"time"

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
