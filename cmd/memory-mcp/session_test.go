package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/scope"
)

// inProcess serves a real app, on a real database and workspace, to an
// in-memory client, for tests that need to reach inside the server.
func inProcess(t *testing.T, register func(*mcp.Server)) *mcp.ClientSession {
	t.Helper()
	root := t.TempDir()
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "memory.db"), Root: root, Project: scope.IdentityOf(root), TokenBudget: 1500, Confirmations: 2}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := openApp(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv := server.New(a.App, log)
	if register != nil {
		register(srv.MCP())
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestPanicBecomesToolError(t *testing.T) {
	cs := inProcess(t, func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "boom"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			var m map[string]int
			m["x"] = 1 // a nil map write: a real panic
			return nil, struct{}{}, nil
		})
	})
	msg := fails(t, cs, "boom", map[string]any{})
	if !strings.HasPrefix(msg, "internal:") {
		t.Errorf("panic gave %q", msg)
	}
	// The session goes on.
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "after", "body": "still serving"})
}

// rawSession speaks JSON lines to the real binary, to send what no client
// library would.
type rawSession struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

func startRaw(t *testing.T, e env) *rawSession {
	t.Helper()
	cmd := e.command()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("server did not exit after stdin closed")
		}
	})
	return &rawSession{t: t, in: in, out: bufio.NewReaderSize(out, 1<<20)}
}

func (r *rawSession) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// next reads frames until one with the given id arrives, returning the
// others seen on the way.
func (r *rawSession) next(id string) (map[string]any, []map[string]any) {
	r.t.Helper()
	var others []map[string]any
	for {
		line, err := r.out.ReadBytes('\n')
		if err != nil {
			r.t.Fatalf("reading frames: %v (others: %v)", err, others)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			r.t.Fatalf("stdout carried a non-JSON line: %q", line)
		}
		if got, _ := json.Marshal(m["id"]); string(got) == id {
			return m, others
		}
		others = append(others, m)
	}
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestMalformedInputKeepsSession(t *testing.T) {
	r := startRaw(t, newEnv(t))
	r.send(initLine)
	r.next("1")
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	junk := []string{
		`this is not json`,
		`{"jsonrpc":"2.0","id":`,
		"\xff\xfe{\"jsonrpc\":\"2.0\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\x00\"}",
		`[]`,
		`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`,
		`{"jsonrpc":"1.0","id":9,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"nested":true},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":10,"method":"no/such/method"}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"memory_write","arguments":"not an object"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":5,"key":[],"body":{}}}}`,
		strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
		`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"big","body":"` + strings.Repeat("x", 10<<20) + `"}}}`,
	}
	for _, j := range junk {
		r.send(j)
	}
	r.send(`{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)
	res, others := r.next("99")
	tools, _ := res["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 7 {
		t.Fatalf("tools/list after junk: %v", res)
	}
	errs := 0
	for _, o := range others {
		if o["error"] != nil || o["result"] != nil {
			errs++
		}
	}
	if errs < len(junk)-1 {
		t.Errorf("answered %d of %d junk lines: %v", errs, len(junk), others)
	}
}

func TestStdoutCarriesOnlyFrames(t *testing.T) {
	e := newEnv(t)
	e.extra = append(e.extra, "PROMETHEUS_MEMORY_LOG_LEVEL=debug")
	r := startRaw(t, e)
	r.send(initLine)
	r.next("1")
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"k","body":"b"}}}`)
	res, _ := r.next("2") // next fails the test on any non-JSON line
	if res["result"] == nil {
		t.Fatalf("write: %v", res)
	}
}

func TestEmptyWorkspaceRootIsCreatedLazily(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "working", "key": "note", "body": "no file for working memory"})
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus")); !os.IsNotExist(err) {
		t.Errorf("a working record created the memories directory: %v", err)
	}
}
