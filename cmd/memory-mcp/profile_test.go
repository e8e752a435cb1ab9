package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestProfilesWrittenWhenTheServerEnds: the CPU and heap profiles named in
// the environment are written when the stdio server's input closes, as
// pprof's gzipped protocol buffers holding their sample types.
func TestProfilesWrittenWhenTheServerEnds(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "heap.out")
	e.extra = []string{profileEnv + "=" + cpu, heapEnv + "=" + heap}
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "profiled", "body": "Written while profiling."})
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]string{
		cpu:  {"samples", "cpu", "nanoseconds"},
		heap: {"alloc_space", "inuse_space", "bytes"},
	} {
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
}

// TestProfileToAPathThatCannotBeWritten: the server still serves, and says
// why on stderr, never on stdout.
func TestProfileToAPathThatCannotBeWritten(t *testing.T) {
	e := newEnv(t)
	missing := filepath.Join(t.TempDir(), "no", "such", "dir")
	e.extra = []string{profileEnv + "=" + filepath.Join(missing, "cpu.out"), heapEnv + "=" + filepath.Join(missing, "heap.out")}
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
	for _, s := range []string{"cpu profile:", "heap profile:"} {
		if !bytes.Contains(stderr.Bytes(), []byte(s)) {
			t.Errorf("stderr does not say %q: %s", s, stderr.String())
		}
	}
}
