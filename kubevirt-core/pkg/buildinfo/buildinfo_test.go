package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := func(mod string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/d8virt/kubevirt-core", Version: mod}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name    string
		version string
		bi      *debug.BuildInfo
		want    Info
	}{
		{"stamped release", "v1.2.3", vcs("(devel)", "vcs.revision", commit, "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "false", "GOOS", "linux", "GOARCH", "arm64"),
			Info{GitVersion: "v1.2.3", GitCommit: commit, GitTreeState: "clean", BuildDate: "2026-12-01T10:00:00Z", GoVersion: "go1.26.0", Compiler: runtime.Compiler, Platform: "linux/arm64"}},
		{"checkout with changes", "", vcs("(devel)", "vcs.revision", commit, "vcs.modified", "true"),
			Info{GitVersion: "v0.0.0-devel+0123456789ab", GitCommit: commit, GitTreeState: "dirty", GoVersion: "go1.26.0", Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}},
		{"module release", "", vcs("v0.4.0"),
			Info{GitVersion: "v0.4.0", GoVersion: "go1.26.0", Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}},
		{"no build information", "", nil,
			Info{GitVersion: "v0.0.0-devel", GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := From(tc.version, tc.bi); got != tc.want {
				t.Errorf("From = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}
