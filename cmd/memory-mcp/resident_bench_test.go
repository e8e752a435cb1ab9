package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
)

// BenchmarkResident writes b.N project facts, searches and reads them
// back through the real binary over stdio, and reports what the server
// process held at the end (/proc/PID/status): its peak resident set, and
// the anonymous and file-backed parts of the resident set. The times are
// the client's, per call; the memory is the point. memory-bench -compare
// measures the same at a fixed size.
func BenchmarkResident(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("no /proc here")
	}
	cs, cmd, _ := startBinary(b, binary, newEnv(b))
	defer cs.Close()
	ctx := context.Background()
	c := corpus.New(benchSeed + 5)
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("resident-%d", i)
		if err := benchCall(ctx, cs, "memory_write", map[string]any{"type": "semantic", "key": key, "body": c.Text(30), "description": c.Description()}); err != nil {
			b.Fatal(err)
		}
		if err := benchCall(ctx, cs, "memory_search", map[string]any{"query": c.Query()}); err != nil {
			b.Fatal(err)
		}
		if err := benchCall(ctx, cs, "memory_read", map[string]any{"type": "semantic", "key": key}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st, err := procStatus(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct{ field, unit string }{{"VmHWM", "peak-KiB"}, {"RssAnon", "anon-KiB"}, {"RssFile", "file-KiB"}} {
		if v, ok := st[m.field]; ok {
			b.ReportMetric(float64(v), m.unit)
		}
	}
}

// procStatus reads the kB fields of /proc/PID/status.
func procStatus(pid int) (map[string]int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if v, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
