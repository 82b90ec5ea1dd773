//go:build unix

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

func cmdVersion(args []string) int {
	const sub = "version"
	fs := newFlagSet(sub)
	pos, command, dashdash, err := parseArgs(fs, args)
	if err != nil {
		return parseFailed(sub, fs, err)
	}
	if len(pos) > 0 || dashdash {
		return usageError(sub, "version takes no arguments; got %q", append(pos, command...))
	}
	fmt.Fprintln(os.Stdout, versionLine())
	return 0
}

// versionLine is what zklock version prints: "zklock v1.2.3 go1.25.0
// linux/amd64". A build from a checkout whose version the go command could
// not stamp says "(devel)", with the VCS revision if it is known.
func versionLine() string {
	version, goVersion := "(devel)", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		} else if rev := vcsRevision(bi.Settings); rev != "" {
			version += " " + rev
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	return strings.Join([]string{"zklock", version, goVersion, runtime.GOOS + "/" + runtime.GOARCH}, " ")
}

// vcsRevision is the build's revision, shortened, with "+dirty" if the
// tree had changes; "" if the build recorded none.
func vcsRevision(settings []debug.BuildSetting) string {
	var rev, modified string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+dirty"
	}
	return rev
}
