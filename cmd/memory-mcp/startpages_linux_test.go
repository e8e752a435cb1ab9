package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// TestFilePagesPicksCleanReadOnlyFileMappings: of a smaps listing, only
// private read-only mappings of files with no page of the process's own
// (resident or swapped out) and not locked are let go.
func TestFilePagesPicksCleanReadOnlyFileMappings(t *testing.T) {
	mapping := func(rng, perms, path, anon, swap, flags string) string {
		return fmt.Sprintf(`%s %s 00000000 08:01 1234 %s
Size:                 64 kB
Rss:                  64 kB
Private_Clean:        64 kB
Private_Dirty:         0 kB
Anonymous:          %s kB
AnonHugePages:         0 kB
Swap:               %s kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
VmFlags: %s
`, rng, perms, path, anon, swap, flags)
	}
	listing := mapping("00400000-00410000", "r-xp", "/usr/bin/memory-mcp", "0", "0", "rd ex mr mw me") +
		mapping("00410000-00420000", "r--p", "/usr/bin/memory-mcp", "0", "0", "rd mr mw me") +
		mapping("00420000-00421000", "r--p", "/usr/bin/memory-mcp", "4", "0", "rd mr mw me ac") + // relocated, then made read-only
		mapping("00421000-00422000", "r--p", "/usr/lib/libc.so.6", "0", "8", "rd mr mw me ac") + // its own copy, swapped out
		mapping("00422000-00430000", "rw-p", "/usr/bin/memory-mcp", "0", "0", "rd wr mr mw me ac") +
		mapping("00430000-00440000", "r--s", "/home/u/.prometheus/memory.db-shm", "0", "0", "rd sh mr mw me") +
		mapping("00440000-00450000", "r-xp", "/usr/lib/libc.so.6", "0", "0", "rd ex mr mw me lo") + // locked
		mapping("7ffd0000-7ffd2000", "r-xp", "[vdso]", "0", "0", "rd ex mr mw me de") +
		mapping("7ffe0000-7ffe1000", "r--p", "", "0", "0", "rd mr mw me") +
		mapping("7fff0000-7fff8000", "r-xp", "/usr/bin/memory-mcp (deleted)", "0", "0", "rd ex mr mw me")
	// A mapping without a path has one field less on its first line.
	listing = strings.Replace(listing, "1234 \n", "1234\n", 1)
	got, err := filePages(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{0x400000, 0x410000}, {0x410000, 0x420000}, {0x7fff0000, 0x7fff8000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("picked %x, want %x", got, want)
	}
	// A listing cut short, or a line that is not a mapping, picks
	// nothing it cannot vouch for.
	cut := mapping("00400000-00410000", "r-xp", "/usr/bin/memory-mcp", "0", "0", "rd ex")
	cut = cut[:strings.Index(cut, "Swap:")]
	for _, bad := range []string{cut, "garbage\n", "zz-yy r-xp 0 0 0 /x\nVmFlags: rd\n", "00500000-00400000 r-xp 0 0 0 /x\nVmFlags: rd\n"} {
		if got, err := filePages(strings.NewReader(bad)); err != nil || len(got) != 0 {
			t.Errorf("%q: picked %x, %v", bad, got, err)
		}
	}
}

// TestReleaseStartPagesKeepsWhatIsTheProcesssOwn: a file mapped read-only
// loses its resident pages and reads the same afterwards; a mapping of a
// file the process wrote to before making it read-only (as the loader
// does with relocations) keeps what was written; and the process goes on
// running Go and C code (SQLite) as before.
func TestReleaseStartPagesKeepsWhatIsTheProcesssOwn(t *testing.T) {
	dir := t.TempDir()
	const size = 256 << 10
	content := bytes.Repeat([]byte("memory-mcp start pages "), size/23+1)[:size]
	clean, f := mapReadOnly(t, content)
	owned, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(owned)
	copy(owned, "relocated")
	if err := unix.Mprotect(owned, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	// Read a byte of every page, so that each is mapped.
	sum := 0
	for i := 0; i < size; i += 4096 {
		sum += int(clean[i]) + int(owned[i])
	}
	if sum == 0 {
		t.Fatal("read nothing")
	}
	if rss := residentKB(t, clean); rss < size>>10 {
		t.Fatalf("the clean mapping holds %d kB after reading it all", rss)
	}

	releaseStartPages()

	if rss := residentKB(t, clean); rss != 0 {
		t.Errorf("a clean read-only mapping of a file still holds %d kB", rss)
	}
	if !bytes.Equal(clean, content) {
		t.Error("the clean mapping reads differently after its pages went")
	}
	if string(owned[:9]) != "relocated" || !bytes.Equal(owned[9:], content[9:]) {
		t.Errorf("the mapping the process wrote to lost its own copy: %q", owned[:9])
	}

	ctx := context.Background()
	st, err := memory.Open(ctx, filepath.Join(dir, "memory.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := memory.Project{ID: scope.IdentityOf(dir)}
	if _, _, err := st.Put(ctx, p, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "after", Body: "Written after the start pages went."}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, p.ID, memory.Selector{Key: "after"})
	if err != nil || got.Body != "Written after the start pages went." {
		t.Fatalf("read back %+v, %v", got, err)
	}
}

// mapReadOnly writes content to a new file and maps it, private and
// read-only, until the test ends; it returns the mapping and the file,
// open until then too.
func mapReadOnly(t *testing.T, content []byte) ([]byte, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mapped")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := unix.Mmap(int(f.Fd()), 0, len(content), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m, f
}

// residentKB is the Rss smaps shows for the mapping that starts at b.
func residentKB(t *testing.T, b []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	start := strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&b[0]))), 16) + "-"
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			n, err := strconv.Atoi(strings.Fields(line)[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no mapping at %s in smaps", start)
	return 0
}

// TestStdioServerLetsGoOfItsStartPages: the real binary holds fewer
// pages of files once its session is initialized than after it answered
// initialize, and still answers; its peak still counts what it let go.
func TestStdioServerLetsGoOfItsStartPages(t *testing.T) {
	h := startHostile(t, newEnv(t))
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.await("1", 30*time.Second)
	before, err := procStatus(h.cmd.Process.Pid)
	if err != nil {
		t.Skip(err)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	h.await("2", 30*time.Second)
	after, err := procStatus(h.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if after["RssFile"] > before["RssFile"]-1024 {
		t.Errorf("pages mapped from files: %d kB after initialized, %d kB before; want at least 1 MiB less", after["RssFile"], before["RssFile"])
	}
	// The kernel's counts of resident pages are kept per CPU and read
	// approximately (off by a few hundred kB here), for the peak too.
	if after["VmHWM"] < before["VmRSS"]-2048 {
		t.Errorf("peak %d kB, below the %d kB held before", after["VmHWM"], before["VmRSS"])
	}
	h.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"after-start","body":"Kept after the start pages went."}}}`)
	if m, _ := h.await("3", 30*time.Second); m["error"] != nil || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("write after the start pages went: %v", m)
	}
}

// BenchmarkReleaseStartPages: what letting go costs a stdio server, twice
// at start (reading smaps and one madvise a mapping).
func BenchmarkReleaseStartPages(b *testing.B) {
	for b.Loop() {
		releaseStartPages()
	}
}

// TestServerRunsOnAfterItsBinaryIsReplaced: an upgrade that replaces the
// binary while a session runs (go install writes a new file and renames
// it over the old one) leaves the server running the old one; the pages
// it let go come back from the old file, even once they have left the
// page cache.
func TestServerRunsOnAfterItsBinaryIsReplaced(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "memory-mcp")
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	cs, cmd, stderr := startBinary(t, bin, e)
	exercise(t, cs, "before-upgrade")
	if err := os.WriteFile(bin+".new", []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	// The old file's pages that no process maps leave the page cache.
	old, err := os.Open(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
	if err != nil {
		t.Skip(err)
	}
	err = unix.Fadvise(int(old.Fd()), 0, 0, unix.FADV_DONTNEED)
	old.Close()
	if err != nil {
		t.Skip(err)
	}
	exercise(t, cs, "after-upgrade")
	res := call(t, cs, "memory_search", map[string]any{"query": "read over"})
	if res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "after-upgrade") {
		t.Fatalf("search after the upgrade: %v", res.StructuredContent)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("the server did not end cleanly: %v\nstderr: %s", err, stderr)
	}
}
