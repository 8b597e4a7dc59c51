package nodeagent

import (
	"reflect"
	"testing"
)

func TestProgramMounts(t *testing.T) {
	private := DefaultPrivateDirs()
	ro := func(src, dst string) Mount { return Mount{Source: src, Target: dst, ReadOnly: true} }
	for _, tc := range []struct {
		path, real string
		want       []Mount
	}{
		// The test suite's binaries: a private /tmp would hide the program from itself.
		{"/tmp/cold/src/bin/e2e/container-disk", "/tmp/cold/src/bin/e2e/container-disk",
			[]Mount{ro("/tmp/cold/src/bin/e2e/container-disk", "/tmp/cold/src/bin/e2e/container-disk")}},
		{"/run/libvirt/bin/tool", "/run/libvirt/bin/tool", []Mount{ro("/run/libvirt/bin/tool", "/run/libvirt/bin/tool")}},
		// bin/<tag> links a release's build in the cache: exec'd through the link, which /tmp hides.
		{"/tmp/cdt/bin/0.1.0/virt-operator", "/root/.cache/d8v/releases/0.1.0/bin/virt-operator",
			[]Mount{ro("/root/.cache/d8v/releases/0.1.0/bin/virt-operator", "/tmp/cdt/bin/0.1.0/virt-operator")}},
		// A link outside into a private directory: the real path is hidden.
		{"/work/bin/x", "/tmp/build/x", []Mount{ro("/tmp/build/x", "/tmp/build/x")}},
		{"/tmp/a/x", "/tmp/b/x", []Mount{ro("/tmp/b/x", "/tmp/a/x"), ro("/tmp/b/x", "/tmp/b/x")}},
		{"/work/main/bin/virt-launcher", "/work/main/bin/virt-launcher", nil},
		{"/bin/busybox", "/usr/bin/busybox", nil},
		// Only below a private directory, not beside one with the same prefix.
		{"/tmpfoo/bin/x", "/tmpfoo/bin/x", nil},
	} {
		if got := programMounts(private, tc.path, tc.real); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("programMounts(%s, %s) = %+v, want %+v", tc.path, tc.real, got, tc.want)
		}
	}
}
