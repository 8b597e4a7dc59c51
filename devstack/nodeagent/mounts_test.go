package nodeagent

import "testing"

func TestProgramMount(t *testing.T) {
	private := DefaultPrivateDirs()
	for _, tc := range []struct {
		program string
		want    bool
	}{
		// The test suite's binaries: a private /tmp would hide the program from itself.
		{"/tmp/cold/src/bin/e2e/container-disk", true},
		{"/tmp/TestX123/001/sh", true},
		{"/run/libvirt/bin/tool", true},
		{"/work/main/bin/virt-launcher", false},
		{"/usr/bin/busybox", false},
		// Only below a private directory, not beside one with the same prefix.
		{"/tmpfoo/bin/x", false},
		{"/tmp", false},
	} {
		m, ok := programMount(private, tc.program)
		if ok != tc.want {
			t.Errorf("programMount(%s) = %v, want %v", tc.program, ok, tc.want)
			continue
		}
		if ok && m != (Mount{Source: tc.program, Target: tc.program, ReadOnly: true}) {
			t.Errorf("programMount(%s) = %+v", tc.program, m)
		}
	}
}
