package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// userHZ is the unit of the CPU times in /proc (USER_HZ, 100 on every Linux architecture Go
// runs the stack on).
const userHZ = 100

// cpuSnapshot is the machine's busy CPU time and each QEMU process's own, in ticks.
type cpuSnapshot struct {
	busy uint64
	qemu map[int]uint64
}

// readCPU reads /proc under root: the busy time of /proc/stat's cpu line (all but idle and
// iowait) and utime+stime of every process whose command is a QEMU system emulator.
func readCPU(root string) (cpuSnapshot, error) {
	stat, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return cpuSnapshot{}, err
	}
	busy, err := busyTicks(stat)
	if err != nil {
		return cpuSnapshot{}, err
	}
	s := cpuSnapshot{busy: busy, qemu: map[int]uint64{}}
	dirs, err := os.ReadDir(root)
	if err != nil {
		return cpuSnapshot{}, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if comm, ticks, ok := processTicks(b); ok && strings.HasPrefix(comm, "qemu-system") {
			s.qemu[pid] = ticks
		}
	}
	return s, nil
}

// busyTicks sums the first line of /proc/stat ("cpu user nice system idle iowait irq softirq
// steal ...") without idle and iowait.
func busyTicks(stat []byte) (uint64, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat starts %q", line)
	}
	var sum uint64
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat field %d %q: %w", i+1, v, err)
		}
		if i != 3 && i != 4 { // idle, iowait
			sum += n
		}
	}
	return sum, nil
}

// processTicks reads a /proc/PID/stat line: the command (in parentheses, which may hold spaces
// and parentheses itself) and utime+stime (fields 14 and 15).
func processTicks(b []byte) (comm string, ticks uint64, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15.
	if len(f) < 13 {
		return "", 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(b[open+1 : end]), u + st, true
}

// cpuCost is what a batch of starts cost the machine, in CPU seconds per start: all of it, and
// the part spent in the QEMU processes the batch started.
type cpuCost struct{ all, qemu float64 }

// costSince is the CPU the machine spent from before to after, per start of n; QEMU processes
// alive at before are not counted as the batch's.
func costSince(before, after cpuSnapshot, n int) cpuCost {
	var q uint64
	for pid, t := range after.qemu {
		if _, old := before.qemu[pid]; !old {
			q += t
		}
	}
	per := func(ticks uint64) float64 { return float64(ticks) / userHZ / float64(n) }
	return cpuCost{all: per(after.busy - before.busy), qemu: per(q)}
}

func (c cpuCost) String() string {
	return fmt.Sprintf("%.1f CPU-s per start (QEMU %.1f, the rest of the stack %.1f)", c.all, c.qemu, c.all-c.qemu)
}

func TestCPUReading(t *testing.T) {
	root := t.TempDir()
	write := func(path, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stat", "cpu  100 5 50 1000 7 3 2 1 0 0\ncpu0 1 2 3\n")
	write("41/stat", "41 (qemu-system-x86) S 1 1 1 0 -1 4194560 0 0 0 0 300 40 0 0 20 0 5 0 100 0 0\n")
	write("42/stat", "42 (virt (launch) er) S 1 1 1 0 -1 4194560 0 0 0 0 9 9 0 0 20 0 5 0 100 0 0\n")
	write("self/stat", "not a pid")
	before, err := readCPU(root)
	if err != nil {
		t.Fatal(err)
	}
	if before.busy != 100+5+50+3+2+1 || len(before.qemu) != 1 || before.qemu[41] != 340 {
		t.Fatalf("read %+v", before)
	}
	after := cpuSnapshot{busy: before.busy + 2000, qemu: map[int]uint64{41: 999, 43: 500, 44: 300}}
	got := costSince(before, after, 4)
	if got.all != 5 || got.qemu != 2 {
		t.Errorf("cost %+v, want 5 and 2 CPU-s per start", got)
	}
}
