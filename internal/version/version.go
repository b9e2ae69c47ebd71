// Package version says which sysray this is: the release it was built as,
// the git revision and when that revision was committed, as a user filing a
// bug, a capture and the agent's metrics each need to say.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release, set at link time (make build: git describe);
// "devel" for a plain go build.
var Version = "devel"

// Info is what a build knows of itself.
type Info struct {
	Version  string // release, or "devel"
	Revision string // git commit, "" when built outside a checkout
	Time     string // the commit's time (RFC 3339), "" when unknown
	Modified bool   // built from a checkout with uncommitted changes
	Go       string // the toolchain
}

// Get reads the build's own record: go build writes the revision and its
// time when it builds inside a git checkout (-buildvcs).
func Get() Info {
	in := Info{Version: Version, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	return in
}

// String is the one line --version prints.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sysray %s", in.Version)
	if in.Revision != "" {
		fmt.Fprintf(&b, " (revision %s", in.Revision)
		if in.Modified {
			b.WriteString(", modified")
		}
		if in.Time != "" {
			fmt.Fprintf(&b, ", %s", in.Time)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s/%s", in.Go, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
