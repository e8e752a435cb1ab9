package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo builds the binary from a fresh clone of this
// repository, as "go build" in a checkout does, and checks that version
// prints the commit it was built from: the build information, not a string
// in the source.
func TestVersionFromBuildInfo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary again")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command(git, "clone", "-q", strings.TrimSpace(string(top)), clone).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "memory-mcp")
	build := exec.Command("go", "build", "-o", bin, "./cmd/memory-mcp")
	build.Dir = clone
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var got buildInfo
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Revision != strings.TrimSpace(string(head)) || got.Modified || got.Time == "" || got.Version == "" {
		t.Errorf("version --json = %s, want revision %s, unmodified, with a time", out, head)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(text), "memory-mcp "+got.Version+" ("+got.Revision) {
		t.Errorf("version = %q %v", text, err)
	}
}

// TestServerInfoVersion: the version a client sees at initialize is the one
// `memory-mcp version` prints, not a number kept by hand.
func TestServerInfoVersion(t *testing.T) {
	e := newEnv(t)
	out, err := e.command("version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &b); err != nil || b.Version == "" {
		t.Fatalf("version --json: %s, %v", out, err)
	}
	cs := connect(t, e, nil)
	if got := cs.InitializeResult().ServerInfo.Version; got != b.Version {
		t.Errorf("serverInfo.version = %q, want %q as the version command prints", got, b.Version)
	}
}
