package e2e

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// userHZ is the unit of the CPU times in /proc (USER_HZ, 100 on every Linux architecture Go
// runs the stack on).
const userHZ = 100

// cpuSnapshot is the machine's busy CPU time and every process's own, in ticks.
type cpuSnapshot struct {
	busy  uint64
	procs map[int]procTicks
}

// procTicks is one process's command and CPU time: its own (utime+stime) and that of its children
// it has waited for (cutime+cstime), so that short-lived helpers (a QEMU capabilities probe, ip,
// nft, qemu-img) are counted with whoever started them.
type procTicks struct {
	comm       string
	self, kids uint64
}

// readCPU reads /proc under root: the busy time of /proc/stat's cpu line (all but idle and
// iowait) and the times of every process.
func readCPU(root string) (cpuSnapshot, error) {
	stat, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return cpuSnapshot{}, err
	}
	busy, err := busyTicks(stat)
	if err != nil {
		return cpuSnapshot{}, err
	}
	s := cpuSnapshot{busy: busy, procs: map[int]procTicks{}}
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
		if p, ok := processTicks(b); ok {
			s.procs[pid] = p
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
// and parentheses itself), utime+stime (fields 14 and 15) and cutime+cstime (16 and 17).
func processTicks(b []byte) (procTicks, bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procTicks{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state): utime is field 14.
	if len(f) < 15 {
		return procTicks{}, false
	}
	var t [4]uint64
	for i := range t {
		n, err := strconv.ParseUint(f[11+i], 10, 64)
		if err != nil {
			return procTicks{}, false
		}
		t[i] = n
	}
	return procTicks{comm: string(b[open+1 : end]), self: t[0] + t[1], kids: t[2] + t[3]}, true
}

// cpuCost is what a batch of starts cost the machine, in CPU seconds per start: all of it, the
// part spent in QEMU processes, and each command's part (its own and its reaped children's).
type cpuCost struct {
	all, qemu float64
	byCommand map[string]float64
}

// processGroup names the group a command's CPU is reported under: QEMU's emulators as one.
func processGroup(comm string) string {
	if strings.HasPrefix(comm, "qemu-system") {
		return "qemu"
	}
	return comm
}

// costSince is the CPU the machine spent from before to after, per start of n. A process alive
// at both counts the difference, a new one all of its time.
func costSince(before, after cpuSnapshot, n int) cpuCost {
	per := func(ticks uint64) float64 { return float64(ticks) / userHZ / float64(n) }
	c := cpuCost{all: per(after.busy - before.busy), byCommand: map[string]float64{}}
	for pid, a := range after.procs {
		spent := a.self + a.kids
		if b, old := before.procs[pid]; old && b.comm == a.comm {
			spent -= min(spent, b.self+b.kids)
		}
		if spent == 0 {
			continue
		}
		c.byCommand[processGroup(a.comm)] += per(spent)
	}
	c.qemu = c.byCommand["qemu"]
	return c
}

// String is the total, the QEMU part, and the commands that cost the most (0.05 CPU-s a start
// or more), most first.
func (c cpuCost) String() string {
	names := make([]string, 0, len(c.byCommand))
	for k, v := range c.byCommand {
		if v >= 0.05 {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool { return c.byCommand[names[i]] > c.byCommand[names[j]] })
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.2f", k, c.byCommand[k])
	}
	return fmt.Sprintf("%.1f CPU-s per start (QEMU %.1f, the rest of the stack %.1f); by command: %s", c.all, c.qemu, c.all-c.qemu, strings.Join(parts, ", "))
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
	write("42/stat", "42 (virt (launch) er) S 1 1 1 0 -1 4194560 0 0 0 0 9 9 7 3 20 0 5 0 100 0 0\n")
	write("self/stat", "not a pid")
	before, err := readCPU(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]procTicks{41: {comm: "qemu-system-x86", self: 340}, 42: {comm: "virt (launch) er", self: 18, kids: 10}}
	if before.busy != 100+5+50+3+2+1 || !reflect.DeepEqual(before.procs, want) {
		t.Fatalf("read %+v", before)
	}
	after := cpuSnapshot{busy: before.busy + 2000, procs: map[int]procTicks{
		41: {comm: "qemu-system-x86", self: 999},            // +659
		42: {comm: "virt (launch) er", self: 18, kids: 210}, // +200 from a child it reaped
		43: {comm: "qemu-system-x86", self: 500},            // new
		44: {comm: "libvirtd", self: 300, kids: 41},         // new
		45: {comm: "idle", self: 0},
	}}
	got := costSince(before, after, 4)
	wantCost := cpuCost{all: 5, qemu: 11.59 / 4, byCommand: map[string]float64{"qemu": 11.59 / 4, "virt (launch) er": 0.5, "libvirtd": 3.41 / 4}}
	if got.all != wantCost.all || !reflect.DeepEqual(round(got.byCommand), round(wantCost.byCommand)) || math.Abs(got.qemu-wantCost.qemu) > 1e-9 {
		t.Errorf("cost %+v, want %+v", got, wantCost)
	}
	if s := got.String(); !strings.Contains(s, "by command: qemu 2.90, libvirtd 0.85, virt (launch) er 0.50") {
		t.Errorf("String() = %q", s)
	}
}

func round(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = math.Round(v*1e6) / 1e6
	}
	return out
}
