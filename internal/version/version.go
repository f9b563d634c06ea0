// Package version prints what --version says for the commands: the
// module version or VCS revision the binary was built from, and the Go
// toolchain, so that a bug report names the build.
package version

import (
	"runtime"
	"runtime/debug"
)

// String is "NAME VERSION GOVERSION": VERSION is the module version when
// installed with go install pkg@version, else the VCS revision (with
// "+dirty" for uncommitted changes) stamped by go build in a checkout,
// else "(devel)".
func String(name string) string {
	return name + " " + fromBuildInfo() + " " + runtime.Version()
}

func fromBuildInfo() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "(devel)"
	}
	return rev[:min(12, len(rev))] + dirty
}
