package proc

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// CloseInheritedOnExec marks every descriptor of this process above stderr close-on-exec, so
// that a daemon it starts does not inherit what this process was handed. Go opens its own
// descriptors close-on-exec; the ones a parent passed down are not: flock(1) running `go test`
// hands the test its lock on /tmp/vm-boot.lock, and every daemon of a stack the test starts would
// hold that lock for its whole life, long after the test.
func CloseInheritedOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list the open descriptors: %w", err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
