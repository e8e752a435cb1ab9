//go:build linux && cgo

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPagesMapOnlyOnceTouched: once the start pages are let go, reading
// one byte of a read-only mapping of a file that sits whole in the page
// cache maps that byte's page alone, not the 64 KiB around it; the
// mapping reads the file all the same, page by page.
func TestPagesMapOnlyOnceTouched(t *testing.T) {
	const size = 1 << 20
	content := make([]byte, size)
	for i := range content {
		content[i] = byte(i*7 + i>>12)
	}
	m, _ := mapReadOnly(t, content)

	releaseStartPages()
	if err := touchedErr(); err != nil {
		t.Skip("this kernel maps pages around the one touched:", err)
	}
	if got := residentKB(t, m); got != 0 {
		t.Fatalf("%d kB resident before any read", got)
	}
	if m[size/2+100] != content[size/2+100] {
		t.Fatal("read the wrong byte")
	}
	if got := residentKB(t, m); got != 4 {
		t.Errorf("one byte read: %d kB resident, want the one page's 4", got)
	}
	if !bytes.Equal(m, content) {
		t.Error("the mapping reads differently from the file")
	}
	if got := residentKB(t, m); got != size>>10 {
		t.Errorf("all read: %d kB resident, want %d", got, size>>10)
	}
}

// TestStdioServerMapsOnlyPagesItTouches: the real binary's code, tables
// and read-only data are registered for write protection (smaps shows
// "uw" among their flags), all but what the loader wrote to, once its session is initialized, and it holds
// less than half its code resident after a write, a search and a read.
func TestStdioServerMapsOnlyPagesItTouches(t *testing.T) {
	h := startHostile(t, newEnv(t))
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.await("1", 30*time.Second)
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for id, call := range []string{
		`"name":"memory_write","arguments":{"type":"semantic","key":"touched-only","body":"Pages come in one at a time."}`,
		`"name":"memory_search","arguments":{"query":"pages one at a time"}`,
		`"name":"memory_read","arguments":{"key":"touched-only"}`,
	} {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s}}`, id+2, call))
		if m, _ := h.await(fmt.Sprint(id+2), 30*time.Second); m["error"] != nil || m["result"].(map[string]any)["isError"] == true {
			t.Fatalf("call %d: %v", id+2, m)
		}
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", h.cmd.Process.Pid))
	if err != nil {
		t.Skip(err)
	}
	maps := smapsOf(t, h.cmd.Process.Pid, exe)
	if len(maps) == 0 {
		t.Fatalf("no mapping of %s in the server's smaps", exe)
	}
	var registered int
	for _, mp := range maps {
		if mp.perms[1] == 'w' || mp.anon > 0 {
			// Written to (the loader's relocations): the process's own
			// pages, left as they are (see filePages).
			continue
		}
		if !mp.flags["uw"] {
			if touchedIn(t) {
				t.Errorf("%s %s: flags %v, no uw", mp.rng, mp.perms, mp.flags)
			}
			continue
		}
		registered++
		if mp.perms[2] == 'x' && mp.rss*2 > mp.size {
			t.Errorf("code %s: %d of %d kB resident after three calls", mp.rng, mp.rss, mp.size)
		}
	}
	if registered == 0 && touchedIn(t) {
		t.Error("no mapping of the executable registered")
	}
}

// touchedIn reports whether this kernel lets this process register its
// mappings (see mapTouchedOnly): if not, neither does the server's.
func touchedIn(t *testing.T) bool {
	err := touchedErr()
	if err != nil {
		t.Log("this kernel maps pages around the one touched:", err)
	}
	return err == nil
}

type smapping struct {
	rng, perms      string
	size, rss, anon int
	flags           map[string]bool
}

// smapsOf lists the mappings of path in process pid's smaps.
func smapsOf(t *testing.T, pid int, path string) []smapping {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var out []smapping
	var cur *smapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			cur = nil
			if len(fields) >= 6 && fields[5] == path {
				out = append(out, smapping{rng: fields[0], perms: fields[1], flags: map[string]bool{}})
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil {
			continue
		}
		switch fields[0] {
		case "Size:":
			fmt.Sscan(fields[1], &cur.size)
		case "Rss:":
			fmt.Sscan(fields[1], &cur.rss)
		case "Anonymous:":
			fmt.Sscan(fields[1], &cur.anon)
		case "VmFlags:":
			for _, fl := range fields[1:] {
				cur.flags[fl] = true
			}
		}
	}
	return out
}

// TestStdioServerStartedWithStdinClosedEnds: a server started with its
// standard input closed reads end of input and ends, as the Go runtime
// makes it (/dev/null in its place): the descriptor its mappings are
// registered with, opened before the runtime starts, never takes the
// place of a standard one, where the server waited on it for ever.
func TestStdioServerStartedWithStdinClosedEnds(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command("/bin/sh", "-c", `exec "$0" serve <&-`, binary)
	cmd.Env, cmd.Dir = e.vars(), e.root
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the server ended with %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
		in, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", cmd.Process.Pid))
		cmd.Process.Kill()
		<-done
		t.Fatalf("the server started with stdin closed still runs after 20 s (stdin: %s, %d descriptors)", in, len(fds))
	}
	if out.Len() > 0 {
		t.Errorf("wrote %q with no input", out.String())
	}
}
