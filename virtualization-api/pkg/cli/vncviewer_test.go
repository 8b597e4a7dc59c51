package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// vnc starts the first viewer on PATH at the local port, and ends with it (its exit code too).
func TestVNCStartsAViewer(t *testing.T) {
	for _, tc := range []struct {
		viewers []string // on PATH
		exit    string
		code    int
		args    string // the started viewer's arguments, as a pattern
	}{
		{[]string{"remote-viewer", "vncviewer"}, "0", 0, `^vnc://127\.0\.0\.1:[0-9]+$`},
		{[]string{"vncviewer"}, "0", 0, `^127\.0\.0\.1::[0-9]+$`},
		{[]string{"remote-viewer"}, "3", 3, `^vnc://127\.0\.0\.1:[0-9]+$`},
	} {
		dir := t.TempDir()
		for _, v := range tc.viewers {
			script := "#!/bin/sh\necho \"$@\" > \"$0.args\"\nexit " + tc.exit + "\n"
			if err := os.WriteFile(filepath.Join(dir, v), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("PATH", dir)
		code, out, errOut := run(t, newFakes(), "vnc", "web")
		started := filepath.Join(dir, tc.viewers[0])
		if code != tc.code || !strings.Contains(out, "starting "+started) {
			t.Errorf("%v: exit %d, want %d; out %q err %q", tc.viewers, code, tc.code, out, errOut)
		}
		got, err := os.ReadFile(started + ".args")
		if err != nil || !regexp.MustCompile(tc.args).MatchString(strings.TrimSpace(string(got))) {
			t.Errorf("%v: the viewer got %q (%v), want %s", tc.viewers, got, err, tc.args)
		}
	}
}
