package proc

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// How often Stop looks whether the process is gone, and how long it waits after the SIGKILL.
const (
	pollInterval = 50 * time.Millisecond
	killWait     = 5 * time.Second
)

// Stop sends pid SIGTERM, SIGKILL once grace has passed, and waits until running reports it gone;
// running is Alive(pid) when nil, and a caller that can tell its process from a stranger that got
// the pid since (by the executable) passes its own check. killed reports that it took the
// SIGKILL; an error tells a failed signal or a process that outlived the SIGKILL.
func Stop(pid int, grace time.Duration, running func() bool) (killed bool, err error) {
	if running == nil {
		running = func() bool { return Alive(pid) }
	}
	signal := func(sig syscall.Signal) error {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal process %d: %w", pid, err)
		}
		return nil
	}
	killed, err = Terminate(signal, running, grace, killWait)
	if errors.Is(err, ErrSurvivedKill) {
		err = fmt.Errorf("process %d %w", pid, err)
	}
	return killed, err
}

// ErrSurvivedKill is Terminate's error when something still runs after the SIGKILL.
var ErrSurvivedKill = errors.New("survived SIGKILL")

// Terminate is Stop for what one pid does not name, such as a set of process groups: signal sends
// a signal to all of it, running tells whether anything of it is left. It sends SIGTERM, SIGKILL
// once grace has passed, and waits up to killWait after that. An error from signal's SIGTERM ends
// it at once; the SIGKILL's is ignored, since only what is left afterwards counts.
func Terminate(signal func(syscall.Signal) error, running func() bool, grace, killWait time.Duration) (killed bool, err error) {
	if err := signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	if waitGone(running, grace) {
		return false, nil
	}
	_ = signal(syscall.SIGKILL)
	if waitGone(running, killWait) {
		return true, nil
	}
	return true, ErrSurvivedKill
}

// waitGone polls running until it reports false or timeout has passed, and tells which.
func waitGone(running func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for running() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}
