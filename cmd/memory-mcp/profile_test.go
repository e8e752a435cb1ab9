package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfilesWrittenWhenTheServerEnds: the CPU profile named in the
// environment is written when the stdio server's input closes, as pprof's
// gzipped protocol buffer holding its sample types; a heap profile asked
// of the shipped build is not written, and stderr says why.
func TestProfilesWrittenWhenTheServerEnds(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	cpu, heap := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "heap.out")
	e.extra = []string{profileEnv + "=" + cpu, heapEnv + "=" + heap}
	stderr := writeOnceWith(t, binary, e)
	hasProfile(t, cpu, "samples", "cpu", "nanoseconds")
	if _, err := os.Stat(heap); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a heap profile from a build without one: %v", err)
	}
	if !strings.Contains(stderr, "heap profile: not in this build") {
		t.Errorf("stderr does not say the build has no heap profile: %s", stderr)
	}
}

// TestHeapProfileInAHeapprofileBuild: built with -tags heapprofile, the
// server writes the heap profile named in the environment when it ends.
func TestHeapProfileInAHeapprofileBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "memory-mcp")
	build := exec.Command("go", "build", "-tags", "heapprofile", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	e := newEnv(t)
	heap := filepath.Join(t.TempDir(), "heap.out")
	e.extra = []string{heapEnv + "=" + heap}
	writeOnceWith(t, bin, e)
	hasProfile(t, heap, "alloc_space", "inuse_space", "bytes")
}

// TestShippedBuildDoesNotSampleTheHeap: nothing in the shipped binary
// reads the runtime's heap profile, so the linker sets the runtime's
// disableMemoryProfiling, which turns sampling off at start (and its
// table of call stacks is never made).
func TestShippedBuildDoesNotSampleTheHeap(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Skipf("not an ELF binary: %v", err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != "runtime.disableMemoryProfiling" {
			continue
		}
		sec := f.Sections[s.Section]
		if sec.Type == elf.SHT_NOBITS {
			t.Fatalf("%s is in %s, zero at start: the heap is sampled", s.Name, sec.Name)
		}
		b := make([]byte, 1)
		if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
			t.Fatal(err)
		}
		if b[0] != 1 {
			t.Errorf("%s = %d: something in the binary reads the heap profile, and every run samples the heap", s.Name, b[0])
		}
		return
	}
	t.Fatal("no runtime.disableMemoryProfiling in the binary's symbols")
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
	// The shipped build writes no heap profile, and says so (a write that
	// fails is heapprofile.go's, the same code as the CPU profile's).
	for _, s := range []string{"cpu profile: open " + missing, "heap profile: not in this build"} {
		if !bytes.Contains(stderr.Bytes(), []byte(s)) {
			t.Errorf("stderr does not say %q: %s", s, stderr.String())
		}
	}
}
