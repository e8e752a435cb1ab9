package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// environOf is the environment process pid was started with, by exec.
func environOf(t testing.TB, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Skip(err)
	}
	out := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			out[k] = v
		}
	}
	return out
}

// switchesOf is the sum of the voluntary context switches of process
// pid's threads.
func switchesOf(t testing.TB, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		t.Skip("no /proc/PID/task")
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.Atoi(strings.TrimSpace(v))
				n += k
			}
		}
	}
	return n
}

// startWithGodebug starts the real binary with GODEBUG=godebug and
// initializes it.
func startWithGodebug(t testing.TB, godebug string) *hostileSession {
	t.Helper()
	e := newEnv(t)
	e.extra = append(e.extra, "GODEBUG="+godebug)
	h := startHostile(t, e)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	h.await("1", 30*time.Second)
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return h
}

// writeNumbered writes fact number i through h and fails on any error.
func writeNumbered(t testing.TB, h *hostileSession, i int) {
	t.Helper()
	id := strconv.Itoa(100 + i)
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"fact-%d","body":"Fact %d."}}}`, id, i, i))
	if m, _ := h.await(id, 30*time.Second); m["error"] != nil || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("write %d: %v", i, m)
	}
}

// TestStdioServerKeepsItsMonitorAwake: the real binary starts itself
// again, in the same process, with the monitor's setting added to the
// GODEBUG it was given, keeps its name, and serves as before. A GODEBUG
// that already sets schedtrace (schedtrace=0, the monitor's deep sleep)
// is left as it is. How much this saves is BenchmarkStdioWriteSwitches's
// to measure, not a test's: a count of context switches depends on the
// machine's load.
func TestStdioServerKeepsItsMonitorAwake(t *testing.T) {
	for _, godebug := range []string{"gctrace=0", "schedtrace=0"} {
		h := startWithGodebug(t, godebug)
		pid := h.cmd.Process.Pid
		want := godebug + "," + monitorSetting
		if godebug == "schedtrace=0" {
			want = godebug
		}
		if got := environOf(t, pid)["GODEBUG"]; got != want {
			t.Errorf("given GODEBUG=%s, the server runs with %q; want %q", godebug, got, want)
		}
		// Started again by its path, it keeps its name (ps, pgrep, top).
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != clip(filepath.Base(binary), 15) {
			t.Errorf("the server's name is %q, %v; want %q", comm, err, clip(filepath.Base(binary), 15))
		}
		for i := range 20 {
			writeNumbered(t, h, i)
		}
		h.send(`{"jsonrpc":"2.0","id":91,"method":"tools/call","params":{"name":"memory_read","arguments":{"key":"fact-7"}}}`)
		if m, _ := h.await("91", 30*time.Second); !strings.Contains(fmt.Sprint(m), "Fact 7.") {
			t.Errorf("read back: %v", m)
		}
	}
}

// BenchmarkStdioWriteSwitches writes facts through the real binary with
// the monitor kept awake (the default) and with its deep sleep
// (GODEBUG=schedtrace=0, which the binary leaves as it is, and whose
// monitor wakes every 20 µs through each call), and reports the server's
// voluntary context switches per write. On an idle 2-core machine the
// first is well under half the second.
func BenchmarkStdioWriteSwitches(b *testing.B) {
	for _, c := range []struct{ name, godebug string }{{"awake", "gctrace=0"}, {"deep-sleep", "schedtrace=0"}} {
		b.Run(c.name, func(b *testing.B) {
			h := startWithGodebug(b, c.godebug)
			writeNumbered(b, h, -1)
			pid := h.cmd.Process.Pid
			before := switchesOf(b, pid)
			b.ResetTimer()
			for i := range b.N {
				writeNumbered(b, h, i)
			}
			b.StopTimer()
			b.ReportMetric(float64(switchesOf(b, pid)-before)/float64(b.N), "switches/write")
		})
	}
}

// clip is s cut to n bytes, as the kernel cuts a process's name.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// TestStdioServerKeepsItsMonitorAwakeHoweverRun: every command line that
// serves over stdio (serve, --db or -db before or after it, with its value
// apart or joined) has the monitor kept awake, from the start in C: the
// server runs with the setting and says nothing of failing to.
func TestStdioServerKeepsItsMonitorAwakeHoweverRun(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"serve"},
		{"--db", e.db, "serve"},
		{"serve", "-db=" + e.db},
		{"--db=" + e.db},
	} {
		h := startHostileCmd(t, e.command(args...))
		h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if m, _ := h.await("1", 30*time.Second); m["result"] == nil {
			t.Fatalf("%v: no answer to initialize: %v", args, m)
		}
		got := environOf(t, h.cmd.Process.Pid)["GODEBUG"]
		h.exit(15 * time.Second)
		if got != monitorSetting {
			t.Errorf("%v: the server runs with GODEBUG=%q, want %q", args, got, monitorSetting)
		}
		if strings.Contains(h.stderr.String(), "could not start again") {
			t.Errorf("%v: %s", args, h.stderr.String())
		}
	}
}
