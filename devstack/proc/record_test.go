package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.pid")
	if _, err := ReadRecord(path); !os.IsNotExist(err) {
		t.Fatalf("missing record: %v", err)
	}
	r, err := Start(os.Getpid(), "/checkout/bin/d")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteRecord(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != r || !got.Alive() {
		t.Fatalf("read %+v (alive %v), wrote %+v", got, got.Alive(), r)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("WriteRecord left %d files", len(entries))
	}
}

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Record
		err  string
	}{
		{in: `{"pid":42,"startTicks":7,"bin":"/a/bin/x"}`, want: Record{Identity{42, 7}, "/a/bin/x"}},
		{in: "{\"pid\":42,\"startTicks\":7}\n", want: Record{Identity: Identity{42, 7}}},
		{in: "4321\n", want: Record{Identity: Identity{Pid: 4321}}}, // a pid file of older tools
		{in: "0", err: "bad pid"},
		{in: "-3", err: "bad pid"},
		{in: "", err: "daemon record"},
		{in: "x", err: "daemon record"},
		{in: `{"pid":42}`, err: "want a pid and a start time"},
		{in: `{"pid":-1,"startTicks":7}`, err: "want a pid and a start time"},
	} {
		got, err := parseRecord([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{`{"pid":42,"startTicks":7,"bin":"/a/bin/x"}`, "4321", "", "{}", `{"pid":1e99}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err == nil && r.Pid <= 0 {
			t.Fatalf("%q: accepted pid %d", b, r.Pid)
		}
	})
}
