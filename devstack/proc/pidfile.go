package proc

import (
	"os"
	"strconv"
	"strings"
)

// ReadPidFile returns the pid recorded in a pid file, or 0 when there is none: no file, or no
// positive number in it. Whether that pid still runs is the caller's question.
func ReadPidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// WritePidFile records pid in a pid file.
func WritePidFile(path string, pid int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(pid)), 0o644)
}
