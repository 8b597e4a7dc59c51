package proc

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestTerminate(t *testing.T) {
	errSignal := errors.New("no such group")
	for _, tc := range []struct {
		name string
		// diesOn is the signal that ends the fake; 0 for none.
		diesOn    syscall.Signal
		signalErr error
		killed    bool
		err       error
		sent      []syscall.Signal
	}{
		{name: "ends on SIGTERM", diesOn: syscall.SIGTERM, sent: []syscall.Signal{syscall.SIGTERM}},
		{name: "ends on SIGKILL", diesOn: syscall.SIGKILL, killed: true, sent: []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}},
		{name: "survives", killed: true, err: ErrSurvivedKill, sent: []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}},
		{name: "signal fails", signalErr: errSignal, err: errSignal, sent: []syscall.Signal{syscall.SIGTERM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent []syscall.Signal
			dead := false
			signal := func(sig syscall.Signal) error {
				sent = append(sent, sig)
				dead = dead || sig == tc.diesOn
				return tc.signalErr
			}
			killed, err := Terminate(signal, func() bool { return !dead }, 100*time.Millisecond, 100*time.Millisecond)
			if killed != tc.killed || !errors.Is(err, tc.err) || fmt.Sprint(sent) != fmt.Sprint(tc.sent) {
				t.Errorf("Terminate = %v, %v after %v; want %v, %v after %v", killed, err, sent, tc.killed, tc.err, tc.sent)
			}
		})
	}
}

func TestStop(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		killed       bool
	}{
		{"exits on SIGTERM", "sleep 30", false},
		{"ignores SIGTERM", `trap "" TERM; while :; do sleep 0.05; done`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", tc.script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			// Let the shell set up its trap.
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			killed, err := Stop(cmd.Process.Pid, 500*time.Millisecond, nil)
			if err != nil || killed != tc.killed {
				t.Fatalf("Stop = %v, %v; want killed %v", killed, err, tc.killed)
			}
			if Alive(cmd.Process.Pid) {
				t.Error("still alive after Stop")
			}
			if !tc.killed && time.Since(start) > 400*time.Millisecond {
				t.Errorf("took %s for a process that exits on SIGTERM", time.Since(start))
			}
		})
	}
	// A process that is already gone is stopped at once.
	if killed, err := Stop(1<<22+1, time.Second, func() bool { return false }); err != nil || killed {
		t.Errorf("Stop of a gone process = %v, %v", killed, err)
	}
}
