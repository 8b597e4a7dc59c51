package proc

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// Fields 5 to 21, the start time (field 22), and two more.
	tail := strings.Repeat(" 0", 17) + " 4242 0 0"
	for _, tc := range []struct {
		name, line string
		want       Stat
		bad        bool
	}{
		{name: "plain", line: "12 (sleep) S 7" + tail, want: Stat{State: 'S', Parent: 7, StartTicks: 4242}},
		{name: "zombie", line: "12 (sleep) Z 1" + tail, want: Stat{State: 'Z', Parent: 1, StartTicks: 4242}},
		{name: "space and paren in name", line: "12 (a) b (c) R 3" + tail, want: Stat{State: 'R', Parent: 3, StartTicks: 4242}},
		{name: "no name", line: "12 S 3" + tail, bad: true},
		{name: "short", line: "12 (sleep) S 3 0 0", bad: true},
		{name: "bad start time", line: "12 (sleep) S 3" + strings.Repeat(" 0", 17) + " x 0 0", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line + "\n"))
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, st := range []struct {
		s      byte
		exited bool
	}{{'R', false}, {'S', false}, {'D', false}, {'Z', true}, {'X', true}} {
		if got := (Stat{State: st.s}).Exited(); got != st.exited {
			t.Errorf("state %c: Exited %v, want %v", st.s, got, st.exited)
		}
	}
}

func TestAliveAndIdentity(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	for _, pid := range []int{0, -1} {
		if Alive(pid) {
			t.Errorf("Alive(%d)", pid)
		}
	}
	self, err := Identify(os.Getpid())
	if err != nil || !self.Alive() {
		t.Fatalf("Identify(self) = %+v, %v", self, err)
	}
	if (Identity{Pid: self.Pid, StartTicks: self.StartTicks + 1}).Alive() {
		t.Error("an identity with another start time is alive")
	}
	if exe, err := Exe(os.Getpid()); err != nil || exe != mustExecutable(t) {
		t.Errorf("Exe = %q, %v", exe, err)
	}

	// A child that exited and is not reaped yet is a zombie: gone.
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, _ := Identify(cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for Alive(cmd.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(cmd.Process.Pid) {
		t.Error("exited child still alive")
	}
	if st, err := ReadStat(cmd.Process.Pid); err != nil || !st.Exited() || st.Parent != os.Getpid() {
		t.Errorf("stat of the zombie: %+v, %v", st, err)
	}
	if id.Alive() {
		t.Error("identity of the exited child alive")
	}
	if _, err := Identify(cmd.Process.Pid); err == nil {
		t.Error("identified a zombie")
	}
	_ = cmd.Wait()
}

func TestList(t *testing.T) {
	pids, err := List()
	if err != nil {
		t.Fatal(err)
	}
	self := false
	for _, pid := range pids {
		if pid <= 0 {
			t.Errorf("List returned pid %d", pid)
		}
		self = self || pid == os.Getpid()
	}
	if !self {
		t.Errorf("List (%d pids) lacks this process, %d", len(pids), os.Getpid())
	}
}

func TestNamespace(t *testing.T) {
	ns, err := Namespace(os.Getpid(), "mnt")
	if err != nil || !strings.HasPrefix(ns, "mnt:[") {
		t.Fatalf("Namespace(self, mnt) = %q, %v", ns, err)
	}
	pids, err := InNamespace("mnt", ns)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pid := range pids {
		found = found || pid == os.Getpid()
	}
	if !found {
		t.Errorf("InNamespace(mnt, %s) lacks this process", ns)
	}
	if pids, err := InNamespace("mnt", "mnt:[0]"); err != nil || len(pids) != 0 {
		t.Errorf("InNamespace of no namespace = %v, %v", pids, err)
	}
}

func mustExecutable(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
