// Package buildinfo tells which build of the core is running, in the shape of KubeVirt's
// version.Info (what GET subresources.kubevirt.io/v1/version answers and virtctl version prints).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release, stamped at build time with
// -ldflags "-X github.com/d8virt/kubevirt-core/pkg/buildinfo.Version=v1.2.3". Unstamped builds
// report a development version made from the VCS commit Go records.
var Version = ""

// Info is KubeVirt's version.Info, field for field and with its JSON names.
type Info struct {
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// String is the version alone, as KubeVirt's Info prints.
func (i Info) String() string { return i.GitVersion }

// Get describes the running binary.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(Version, bi)
}

// From builds the Info from a stamped version (may be empty) and the binary's build information
// (may be nil): the commit, its time and whether the tree was modified come from Go's VCS stamp.
func From(version string, bi *debug.BuildInfo) Info {
	info := Info{
		GoVersion: runtime.Version(),
		Compiler:  runtime.Compiler,
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
			case "vcs.time":
				info.BuildDate = s.Value
			case "vcs.modified":
				info.GitTreeState = "clean"
				if s.Value == "true" {
					info.GitTreeState = "dirty"
				}
			case "GOOS":
				info.Platform = s.Value + "/" + goarch(bi)
			}
		}
	}
	info.GitVersion = gitVersion(version, bi, info.GitCommit)
	return info
}

func goarch(bi *debug.BuildInfo) string {
	for _, s := range bi.Settings {
		if s.Key == "GOARCH" {
			return s.Value
		}
	}
	return runtime.GOARCH
}

// gitVersion is the stamped version, else the main module's version when it was built from a
// module release, else a development version that names the commit.
func gitVersion(version string, bi *debug.BuildInfo, commit string) string {
	switch {
	case version != "":
		return version
	case bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)":
		return bi.Main.Version
	case len(commit) >= 12:
		return "v0.0.0-devel+" + commit[:12]
	}
	return "v0.0.0-devel"
}
