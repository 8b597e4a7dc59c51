package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/devstack/imagepull"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/proc"
)

// start launches the next attempt of c. A configuration error keeps it waiting (retried later); a
// program that cannot be found counts as an attempt that failed to start.
func (r *podRuntime) start(ctx context.Context, c *ctr) {
	now := time.Now()
	pod := r.currentPod()
	spec := r.specOf(pod, c)
	if spec == nil {
		return
	}
	fail := func(err error) {
		c.configErr = err.Error()
		c.nextStart = now.Add(5 * time.Second)
		r.log.Warn("container not started", "container", c.name, "err", err)
		r.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %s", err))
	}
	c.pull.rootfs, c.pull.digest = "", ""
	pulled, err := r.p.puller.Handles(spec.Image)
	if err != nil {
		fail(err)
		return
	}
	if pulled {
		img, err := r.pullImage(ctx, pod, spec)
		if err != nil {
			c.pull.err, c.pull.never = err.Error(), errors.Is(err, imagepull.ErrNeverPull)
			c.pull.failures++
			c.nextStart = now.Add(pullBackoff(r.p.cfg.InitialBackoff, r.p.cfg.MaxBackoff, c.pull.failures))
			r.log.Warn("image not pulled", "container", c.name, "image", spec.Image, "err", err)
			r.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %s", spec.Image, err))
			return
		}
		c.pull = pullState{rootfs: img.Rootfs, digest: img.Digest}
	}
	env, err := ContainerEnv(r.p.envSource(pod, r.state.PodIP), spec)
	if err != nil {
		fail(err)
		return
	}
	mounts, err := r.containerMounts(pod, c, spec, env)
	if err != nil {
		fail(err)
		return
	}
	c.configErr = ""
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		fail(err)
		return
	}
	for _, f := range []string{runningFile, exitFile, startErrorFile} {
		_ = os.Remove(filepath.Join(c.dir, f))
	}
	c.rec.Attempt++
	attempt := c.rec.Attempt
	path, argv, err := ResolveExecutable(r.p.cfg.BinDir, spec.Image, ExpandArgs(env, spec.Command), ExpandArgs(env, spec.Args))
	var program string
	if err == nil {
		program, err = filepath.EvalSymlinks(path)
	}
	if err == nil {
		err = r.prepareRootfs(c)
	}
	if err == nil {
		mounts = append(mounts, programMounts(r.p.cfg.PrivateDirs, path, program)...)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(c.dir, termLogFile), nil, 0o666)
	}
	init := InitSpec{
		Path: path, Argv: argv, Env: env, Dir: spec.WorkingDir, Hostname: podHostname(pod),
		Mounts: mounts, LogFile: r.p.layout.LogFile(r.uid, c.name), Attempt: attempt,
		PrivateDev: len(spec.VolumeDevices) > 0,
	}
	if r.state.NetHost != "" {
		init.NetNS = filepath.Join("/run/netns", localnet.NetNSPrefix+r.state.NetHost)
	}
	if err == nil {
		err = writeJSON(filepath.Join(c.dir, initFile), init)
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = r.startShim(c)
	}
	if err != nil {
		r.log.Warn("container failed to start", "container", c.name, "err", err)
		r.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %s", err))
		c.rec.Running = false
		c.save(r.log)
		r.onExit(c, ExitInfo{Attempt: attempt, ExitCode: startErrorExitCode, StartError: err.Error(), StartedAt: now, FinishedAt: time.Now()})
		return
	}
	c.rec.Running = true
	c.rec.Exe = path
	c.save(r.log)
	c.running = &RunningInfo{Attempt: attempt, ShimPid: cmd.Process.Pid, StartedAt: now}
	if shim, err := proc.Identify(cmd.Process.Pid); err == nil {
		c.running.ShimStartTicks = shim.StartTicks
	}
	r.log.Info("container started", "container", c.name, "attempt", attempt, "exe", path)
	r.event(corev1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.name))
	r.startProbe(ctx, c, spec)
	go r.monitor(ctx, c, attempt, cmd, proc.Identity{})
}

func (r *podRuntime) startShim(c *ctr) (*exec.Cmd, error) {
	logf, err := os.OpenFile(r.p.layout.LogFile(r.uid, c.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(r.p.cfg.AgentBinary, ShimCommand, c.dir)
	cmd.Args[0] = "node-agent"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	// A session of its own: the agent's terminal, process group and exit leave it alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start container shim: %w", err)
	}
	return cmd, nil
}
