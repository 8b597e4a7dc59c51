package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Exit codes of virt-launcher. The Pod's container exit code carries them to whoever decides about
// restarts (RerunOnFailure restarts after ExitCrashed, not after ExitStopped).
const (
	// ExitStopped: the guest powered off, or it was stopped on request (also when it had to be
	// destroyed after the grace period: the stop was wanted, the guest merely ignored ACPI).
	ExitStopped = 0
	// ExitError: the launcher could not start the guest or lost libvirt.
	ExitError = 1
	// ExitCrashed: QEMU died, was killed from outside, or the guest crashed.
	ExitCrashed = 2
)

// Reason says how the guest ended.
type Reason string

const (
	ReasonShutdown  Reason = "Shutdown"  // the guest powered itself off (or did so on the ACPI request)
	ReasonDestroyed Reason = "Destroyed" // stopped on request, forcibly (Kill, or after the grace period)
	ReasonCrashed   Reason = "Crashed"   // QEMU or the guest failed
	ReasonError     Reason = "Error"     // the launcher failed
)

// Result is how the guest ended.
type Result struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
	// ExitCode is what virt-launcher exits with.
	ExitCode int `json:"exitCode"`
}

// API is the Result as the command protocol carries it.
func (r Result) API() *launcherapi.Result {
	return &launcherapi.Result{Reason: string(r.Reason), Message: r.Message, ExitCode: r.ExitCode}
}

// DefaultTerminationLog is where Kubernetes reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// Errors of the domain commands; the command server turns them into gRPC codes.
var (
	ErrNotStarted = errors.New("the VMI has not been started yet")
	ErrFinished   = errors.New("the guest has stopped")
	ErrPaused     = errors.New("VMI is paused")
	// The wording is libvirt's, which is what KubeVirt users see for a guest without an agent.
	ErrNoGuestAgent = errors.New("guest agent is not responding: QEMU guest agent is not connected")
)

// InvalidVMIError is a VMI the launcher cannot run as given: a field the converter or the volume
// preparation rejects. Sending the same VMI again fails the same way.
type InvalidVMIError struct{ Err error }

func (e *InvalidVMIError) Error() string { return e.Err.Error() }
func (e *InvalidVMIError) Unwrap() error { return e.Err }

func invalidVMI(err error) error { return &InvalidVMIError{Err: err} }

// WriteTerminationLog writes res as JSON to path, where Kubernetes picks it up as the container's
// termination message. An empty path writes nothing.
func WriteTerminationLog(path string, res Result) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("termination message: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("termination message: %w", err)
	}
	return nil
}
