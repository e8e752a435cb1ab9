package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// The resident set's split is read from the server's /proc status and
// reported under the table: anonymous and file-backed at the end.
func TestResidentSplitReported(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the server")
	}
	var out bytes.Buffer
	args := []string{"-compare", "-n", "10", "-files", "2", "-ops", "3", "-starts", "1", "-procs", "0"}
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`memory-mcp: resident at the end of the reads: ([0-9.]+) MiB anonymous, ([0-9.]+) MiB mapped from files`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no split of the resident set for memory-mcp:\n%s", out.String())
	}
	for _, v := range m[1:] {
		if f, _ := strconv.ParseFloat(v, 64); f <= 0 || f > 1024 {
			t.Errorf("implausible share %s MiB:\n%s", v, out.String())
		}
	}

	// And with the figures of each operation.
	out.Reset()
	args = []string{"-n", "10", "-files", "2", "-ops", "3", "-starts", "1", "-run", `memory_read \(key`}
	if err := run(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Server peak RSS \(VmHWM\): [0-9.]+ MiB \([0-9.]+ MiB: [0-9.]+ MiB anonymous, [0-9.]+ MiB mapped from files at the end\)`).MatchString(out.String()) {
		t.Fatalf("no split of the resident set in the report:\n%s", out.String())
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tmemory-mcp\nVmPeak:\t 1947884 kB\nVmHWM:\t   36008 kB\nVmRSS:\t   35000 kB\nRssAnon:\t   14676 kB\nRssFile:\t   20324 kB\nRssShmem:\t       0 kB\nThreads:\t8\n"
	m, err := parseStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	want := resident{peak: 36008 << 10, now: 35000 << 10, anon: 14676 << 10, file: 20324 << 10}
	if m != want {
		t.Errorf("parsed %+v, want %+v", m, want)
	}
	if got := m.split(); got != "14.3 MiB anonymous, 19.8 MiB mapped from files" {
		t.Errorf("split = %q", got)
	}
	// A kernel before 4.5 has no RssAnon or RssFile: no split, no error.
	m, err = parseStatus(strings.NewReader("VmHWM:\t 100 kB\nVmRSS:\t 90 kB\n"))
	if err != nil || m.split() != "" || m.peak != 100<<10 {
		t.Errorf("old kernel: %+v, %q, %v", m, m.split(), err)
	}
	if _, err := parseStatus(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("no VmHWM: no error")
	}
	if _, err := parseStatus(strings.NewReader("VmHWM:\t lots kB\n")); err == nil || !strings.Contains(err.Error(), "VmHWM") {
		t.Errorf("unparsable VmHWM: %v", err)
	}
}

func TestPeerName(t *testing.T) {
	for argv, want := range map[string]string{
		"node /x/node_modules/@modelcontextprotocol/server-memory/dist/index.js": "@modelcontextprotocol/server-memory",
		"npx -y @ai-devkit/memory":                                               "@ai-devkit/memory",
		"/usr/local/bin/other-server":                                            "other-server",
		"/tmp/memory-bench -serve-nothing":                                       nothingName,
		"/go/pkg/mod/prom.codes/memory-mcp@v1/memory-bench --serve-nothing=true": nothingName,
	} {
		if got := peerName(strings.Fields(argv)); got != want {
			t.Errorf("peerName(%q) = %q, want %q", argv, got, want)
		}
	}
}

// The do-nothing server answers the calls -compare makes of a
// server-memory peer over stdio, each with an empty result, and is
// reported under its own name.
func TestNothingServerAnswersAsAPeer(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveNothing(ctx, inR, outW); outW.Close() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != nothingName {
		t.Errorf("server name %q, want %q", got, nothingName)
	}
	s := &session{cs: cs}
	fl, err := detect(ctx, s)
	if err != nil || fl != graph {
		t.Fatalf("detected %v, %v; want the server-memory mapping", fl, err)
	}
	f := makeFacts(1, 1)[0]
	name, args := writeCall(fl, f, "semantic")
	calls := map[string]map[string]any{name: args}
	name, args = searchCall(fl, "anything at all")
	calls[name] = args
	name, args, ok := readCall(fl, f.key)
	if !ok {
		t.Fatal("no read call for the server-memory mapping")
	}
	calls[name] = args
	for name, args := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Errorf("%s: %v %+v", name, err, res)
		}
	}
	cs.Close()
	inW.Close()
	if err := <-done; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("served until: %v", err)
	}
}
