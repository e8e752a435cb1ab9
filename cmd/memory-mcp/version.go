package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"prom.codes/memory-mcp/memory/sqlite"
)

// Set by release builds (.ci/build-target) with
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=<sha> -X main.date=<RFC 3339>"
//
// Each one, when set, wins over what the Go toolchain recorded: a build from
// a source archive (Homebrew) has no VCS information, and a shallow checkout
// has no tags to derive a version from. date is the commit's time, which is
// what `go build` records as vcs.time, so a release and a build from a clone
// of the same commit print the same thing.
var version, commit, date string

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	Schema   int    `json:"schema_version"`
}

func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return makeBuildInfo(bi, version, commit, date)
}

// makeBuildInfo merges what the toolchain recorded (bi, nil when the binary
// carries none) with the -ldflags values, which win when set.
func makeBuildInfo(bi *debug.BuildInfo, version, commit, date string) buildInfo {
	b := buildInfo{Version: "(unknown)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Schema: sqlite.SchemaVersion()}
	if bi != nil {
		b.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		b.Version = version
	}
	if commit != "" {
		b.Revision = commit
	}
	if date != "" {
		b.Time = date
	}
	return b
}

// serverVersion is the version the server reports to clients: the same
// as `memory-mcp version` prints.
func serverVersion() string { return readBuildInfo().Version }

func runVersion(c *cli, args []string) error {
	f := newFlags(c, "version").withJSON()
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	b := readBuildInfo()
	if f.JSON() {
		return printJSON(c.stdout, b)
	}
	line := "memory-mcp " + b.Version
	if b.Revision != "" {
		line += " (" + b.Revision
		if b.Modified {
			line += ", modified"
		}
		if b.Time != "" {
			line += ", " + b.Time
		}
		line += ")"
	}
	fmt.Fprintf(c.stdout, "%s\n%s %s, schema %d\n", line, b.Go, b.Platform, b.Schema)
	return nil
}
