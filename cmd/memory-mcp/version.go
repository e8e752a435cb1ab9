package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"prom.codes/memory-mcp/memory/sqlite"
)

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Schema   int    `json:"schema_version"`
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(unknown)", Go: runtime.Version(), Schema: sqlite.SchemaVersion()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
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
	return b
}

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
	fmt.Fprintf(c.stdout, "%s\n%s, schema %d\n", line, b.Go, b.Schema)
	return nil
}
