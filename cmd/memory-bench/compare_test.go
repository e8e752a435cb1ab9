package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// -compare drives the real server through every figure: initialize on
// fresh stores, writes, searches, reads, the peak RSS and concurrent
// writers, and prints one table row for it with no errors.
func TestCompareRunsAgainstTheRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the server")
	}
	var out bytes.Buffer
	args := []string{"-compare", "-n", "20", "-files", "0", "-ops", "5", "-starts", "2", "-procs", "3", "-per-proc", "10", "-write-type", "working"}
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "| memory-mcp |") {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("no row for memory-mcp:\n%s", out.String())
	}
	cells := strings.Split(strings.Trim(row, "| "), " | ")
	if len(cells) != 11 {
		t.Fatalf("row has %d cells, want 11: %q", len(cells), row)
	}
	for i, c := range cells[1:9] {
		if c == "–" || c == "" {
			t.Errorf("figure %d is missing: %q", i+1, row)
		}
	}
	if cells[10] != "0" {
		t.Errorf("concurrent writers met %s errors:\n%s", cells[10], out.String())
	}
}

func TestPeerName(t *testing.T) {
	for argv, want := range map[string]string{
		"node /x/node_modules/@modelcontextprotocol/server-memory/dist/index.js": "@modelcontextprotocol/server-memory",
		"npx -y @ai-devkit/memory":    "@ai-devkit/memory",
		"/usr/local/bin/other-server": "other-server",
	} {
		if got := peerName(strings.Fields(argv)); got != want {
			t.Errorf("peerName(%q) = %q, want %q", argv, got, want)
		}
	}
}
