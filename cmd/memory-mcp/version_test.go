package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
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

// TestMakeBuildInfo: values set with -ldflags win over the toolchain's,
// one by one, and a binary without build information still says something.
func TestMakeBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20250101000000-abcdef123456"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abcdef1234567890"}, {Key: "vcs.time", Value: "2025-01-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  buildInfo
	}{
		{"no build info", nil, "", "", "", buildInfo{Version: "(unknown)"}},
		{"toolchain only", vcs, "", "", "", buildInfo{Version: vcs.Main.Version, Revision: "abcdef1234567890", Time: "2025-01-01T00:00:00Z", Modified: true}},
		{"release", vcs, "v1.2.3", "0123abcd", "2025-02-02T00:00:00Z", buildInfo{Version: "v1.2.3", Revision: "0123abcd", Time: "2025-02-02T00:00:00Z", Modified: true}},
		{"source archive", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v1.2.3", "0123abcd", "2025-02-02T00:00:00Z", buildInfo{Version: "v1.2.3", Revision: "0123abcd", Time: "2025-02-02T00:00:00Z"}},
	}
	for _, tt := range tests {
		got := makeBuildInfo(tt.bi, tt.version, tt.commit, tt.date)
		got.Go, got.Platform, got.Schema = "", "", 0
		if got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestVersionFromLdflags builds the binary the way .ci/build-target does,
// with the version, commit and date set by -ldflags (a misspelt -X name is
// silently ignored by the linker), and checks that version prints them.
func TestVersionFromLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary again")
	}
	bin := filepath.Join(t.TempDir(), "memory-mcp")
	ldflags := "-X main.version=v9.8.7 -X main.commit=0123456789abcdef -X main.date=2001-02-03T04:05:06Z"
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
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
	if got.Version != "v9.8.7" || got.Revision != "0123456789abcdef" || got.Time != "2001-02-03T04:05:06Z" {
		t.Errorf("version --json = %s", out)
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(text), "memory-mcp v9.8.7 (0123456789abcdef") || !strings.Contains(string(text), "2001-02-03T04:05:06Z") {
		t.Errorf("version = %q %v", text, err)
	}
}
