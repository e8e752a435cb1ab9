package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestProfileWrittenWhenTheServerEnds: the CPU profile named in the
// environment is written when the stdio server's input closes, as pprof's
// gzipped protocol buffer holding its sample types.
func TestProfileWrittenWhenTheServerEnds(t *testing.T) {
	e := newEnv(t)
	cpu := filepath.Join(t.TempDir(), "cpu.out")
	e.extra = []string{profileEnv + "=" + cpu}
	writeOnceWith(t, binary, e)
	hasProfile(t, cpu, "samples", "cpu", "nanoseconds")
}

// writeOnceWith starts bin as e's stdio server, writes one fact through a
// real client, closes its input and returns what it wrote to stderr.
func writeOnceWith(t *testing.T, bin string, e env) string {
	t.Helper()
	cs, _, stderr := startBinary(t, bin, e)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "profiled", "body": "Written while profiling."})
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	return stderr.String()
}

// hasProfile fails t unless path holds a gzipped pprof profile naming
// each of want.
func hasProfile(t *testing.T, path string, want ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("profile not written: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: not gzipped: %v", filepath.Base(path), err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	for _, s := range want {
		if !bytes.Contains(raw, []byte(s)) {
			t.Errorf("%s: no %q in the profile", filepath.Base(path), s)
		}
	}
}

// TestProfileToAPathThatCannotBeWritten: the server still serves, and says
// why on stderr, never on stdout.
func TestProfileToAPathThatCannotBeWritten(t *testing.T) {
	e := newEnv(t)
	missing := filepath.Join(t.TempDir(), "no", "such", "dir")
	e.extra = []string{profileEnv + "=" + filepath.Join(missing, "cpu.out")}
	cmd := e.command()
	cmd.Stdin = bytes.NewReader(nil)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("server failed: %v\n%s", err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout carries %q", stdout.String())
	}
	if s := "cpu profile: open " + missing; !bytes.Contains(stderr.Bytes(), []byte(s)) {
		t.Errorf("stderr does not say %q: %s", s, stderr.String())
	}
}
