package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// binary is the real memory-mcp, built once for every end-to-end test.
var binary string

// arenasChild, set in a child test process, makes it run SQLite on eight
// threads at once and print how many arenas the C allocator has then and
// how many it made meanwhile. TestMain builds no binary in such a child.
const arenasChild = "MEMORY_MCP_TEST_ARENAS"

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(arenasChild) != "" {
		os.Exit(m.Run()) // a child of TestOneMallocArena: it runs no binary
	}
	dir, err := os.MkdirTemp("", "memory-mcp-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "memory-mcp")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one machine: a home, a database, and the workspace a server runs in.
type env struct {
	home, db, root string
	extra          []string
}

func newEnv(t testing.TB) env {
	t.Helper()
	home := t.TempDir()
	root := filepath.Join(t.TempDir(), "workspace")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return env{home: home, db: filepath.Join(home, ".prometheus", "memory.db"), root: root}
}

// in returns the same machine with the server in another workspace.
func (e env) in(t *testing.T, name string) env {
	e.root = filepath.Join(filepath.Dir(e.root), name)
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e env) vars() []string {
	return append([]string{
		"HOME=" + e.home, "PATH=" + os.Getenv("PATH"),
		"PROMETHEUS_MEMORY_DB_PATH=" + e.db, "PROMETHEUS_WORKSPACE_ROOT=" + e.root,
	}, e.extra...)
}

func (e env) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = e.vars()
	cmd.Dir = e.root
	return cmd
}

// startBinary starts bin as e's stdio server and connects a real MCP
// client to it; the caller closes the session. It returns the command (for
// its process) and what the server writes to stderr.
func startBinary(tb testing.TB, bin string, e env) (*mcp.ClientSession, *exec.Cmd, *strings.Builder) {
	tb.Helper()
	cmd := exec.Command(bin)
	cmd.Env, cmd.Dir = e.vars(), e.root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		tb.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	return cs, cmd, &stderr
}

// connect starts the binary and connects a real MCP client to it over stdio.
func connect(t *testing.T, e env, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectClient(t, e, mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts))
}

// connectClient is connect for a client the test has set up itself.
func connectClient(t *testing.T, e env, client *mcp.Client) *mcp.ClientSession {
	t.Helper()
	cmd := e.command()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured content.
func ok(t *testing.T, cs *mcp.ClientSession, tool string, args any) map[string]any {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s(%v): %s", tool, args, text(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s structured content: %v", tool, err)
	}
	return out
}

// fails calls a tool that must fail and returns its error text.
func fails(t *testing.T, cs *mcp.ClientSession, tool string, args any) string {
	t.Helper()
	res := call(t, cs, tool, args)
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded: %s", tool, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func bodyOf(t *testing.T, cs *mcp.ClientSession, key string) string {
	t.Helper()
	out := ok(t, cs, "memory_read", map[string]any{"key": key})
	return out["record"].(map[string]any)["body"].(string)
}

func TestScopeChainEndToEnd(t *testing.T) {
	e := newEnv(t)
	a := connect(t, e, nil)
	ok(t, a, "memory_write", map[string]any{"type": "semantic", "key": "test-runner", "body": "use go test", "scope": "system"})
	ok(t, a, "memory_write", map[string]any{"type": "semantic", "key": "test-runner", "body": "use make test"})
	if got := bodyOf(t, a, "test-runner"); got != "use make test" {
		t.Errorf("project A reads %q, want the project override", got)
	}

	b := connect(t, e.in(t, "other"), nil)
	if got := bodyOf(t, b, "test-runner"); got != "use go test" {
		t.Errorf("project B reads %q, want the system record", got)
	}
	ok(t, b, "memory_write", map[string]any{"type": "semantic", "key": "b-only", "body": "private to B"})
	if msg := fails(t, a, "memory_read", map[string]any{"key": "b-only"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("A reading B's record: %s", msg)
	}
	list := ok(t, a, "memory_list", map[string]any{})
	for _, r := range list["records"].([]any) {
		if r.(map[string]any)["key"] == "b-only" {
			t.Error("A lists B's project record")
		}
	}

	ok(t, a, "memory_delete", map[string]any{"key": "test-runner", "scope": "project"})
	if got := bodyOf(t, a, "test-runner"); got != "use go test" {
		t.Errorf("after deleting the override A reads %q", got)
	}
}

func TestListNeverReturnsBodies(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "k1", "body": "BODY-MARKER one", "description": "first"})
	ok(t, cs, "memory_write", map[string]any{"type": "procedural", "key": "k2", "body": "1. BODY-MARKER two"})
	res := call(t, cs, "memory_list", map[string]any{})
	raw, _ := json.Marshal(res)
	if strings.Contains(string(raw), "BODY-MARKER") || strings.Contains(string(raw), `"body"`) {
		t.Fatalf("memory_list carries bodies: %s", raw)
	}
	out := ok(t, cs, "memory_list", map[string]any{})
	if n := len(out["records"].([]any)); n != 2 {
		t.Errorf("listed %d records, want 2", n)
	}
}

func TestErrorsEndToEnd(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	if msg := fails(t, cs, "memory_update", map[string]any{"key": "missing", "body": "x"}); !strings.HasPrefix(msg, "not_found") {
		t.Errorf("update of a missing key: %s", msg)
	}
	cases := []struct {
		args        map[string]any
		code, field string
	}{
		{map[string]any{"type": "fact", "key": "k", "body": "b"}, "invalid_argument", "type"},
		{map[string]any{"type": "semantic", "key": "k", "body": "b", "scope": "galaxy"}, "invalid_argument", "scope"},
		{map[string]any{"type": "semantic", "key": "../../etc/passwd", "body": "b"}, "invalid_argument", "key"},
		{map[string]any{"type": "semantic", "key": "k", "body": "b", "confidence": 1.5}, "invalid_argument", "confidence"},
		{map[string]any{"type": "semantic", "key": "k", "body": ""}, "invalid_argument", "body"},
		{map[string]any{"type": "semantic", "key": "k", "body": strings.Repeat("x", 64<<10+1)}, "too_large", "body"},
	}
	for _, tc := range cases {
		msg := fails(t, cs, "memory_write", tc.args)
		if !strings.HasPrefix(msg, tc.code+":") || !strings.Contains(msg, tc.field) {
			t.Errorf("write %v: %q, want %s naming %s", tc.args["key"], msg, tc.code, tc.field)
		}
	}
	out := ok(t, cs, "memory_list", map[string]any{})
	if n := len(out["records"].([]any)); n != 0 {
		t.Errorf("bad writes left %d records", n)
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "k.md")); !os.IsNotExist(err) {
		t.Errorf("a bad write left a file: %v", err)
	}
}

func TestSearchEndToEnd(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	for i := 0; i < 10; i++ {
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": fmt.Sprintf("note-%d", i), "body": "We write tests for the service and run them often."})
	}
	ok(t, cs, "memory_write", map[string]any{"type": "procedural", "key": "flaky-retry", "body": "Flaky integration tests: rerun with -count=3 and quarantine the flaky ones.", "description": "Dealing with flaky integration tests"})
	out := ok(t, cs, "memory_search", map[string]any{"query": "what do we do about flaky integration tests?"})
	results := out["results"].([]any)
	if len(results) < 2 {
		t.Fatalf("results = %v", results)
	}
	top := results[0].(map[string]any)
	if top["key"] != "flaky-retry" {
		t.Errorf("top result %v, want flaky-retry", top["key"])
	}
	if s := top["score"].(float64); s <= 0 || s > 1 {
		t.Errorf("score %v outside (0, 1]", s)
	}
	if !strings.Contains(top["preview"].(string), "laky") {
		t.Errorf("preview %q", top["preview"])
	}
	filtered := ok(t, cs, "memory_search", map[string]any{"query": "tests", "type": "procedural"})
	if n := len(filtered["results"].([]any)); n != 1 {
		t.Errorf("type filter: %d results", n)
	}
}

// TestToolSchemas snapshots what agents see of every tool, so that an
// accidental change of the API fails here. Run with -update to accept one.
func TestToolSchemas(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		got, err := json.MarshalIndent(map[string]any{
			"name": tool.Name, "title": tool.Title, "description": tool.Description, "annotations": tool.Annotations,
			"inputSchema": tool.InputSchema, "outputSchema": tool.OutputSchema,
		}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "schemas", tool.Name+".json")
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
			t.Errorf("%s schema changed (-want +got):\n%s", tool.Name, diff)
		}
	}
	sort.Strings(names)
	want := []string{"memory_capture", "memory_delete", "memory_list", "memory_read", "memory_search", "memory_update", "memory_write"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

// TestResultsMatchOutputSchemas calls every tool the way an agent would,
// with the fields that are often empty filled in, and checks each
// structured result against the output schema the tool declares: the
// server does not check them itself on every call.
func TestResultsMatchOutputSchemas(t *testing.T) {
	cs := connect(t, newEnv(t), nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if schemas[tool.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
	}
	// The check itself can fail: a result of the wrong shape does.
	if err := schemas["memory_list"].Validate(map[string]any{"records": "none"}); err == nil {
		t.Fatal("a malformed memory_list result passed its schema")
	}
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"memory_write", map[string]any{"type": "semantic", "key": "test-runner", "body": "Run make test.", "description": "How tests run", "tags": []string{"testing"}, "metadata": map[string]string{"origin": "Makefile"}}},
		{"memory_write", map[string]any{"type": "procedural", "key": "release", "body": "1. make release\n2. git push --tags"}},
		{"memory_write", map[string]any{"type": "working", "key": "scratch", "body": "half done", "ttl_seconds": 600, "session_id": "s1"}},
		{"memory_update", map[string]any{"key": "test-runner", "confidence": 0.9}},
		{"memory_read", map[string]any{"key": "test-runner"}},
		{"memory_read", map[string]any{}},
		{"memory_read", map[string]any{"query": "tests", "max_tokens": 200}},
		{"memory_list", map[string]any{"limit": 1}},
		{"memory_search", map[string]any{"query": "make test"}},
		{"memory_capture", map[string]any{"session_id": "s1", "plan": "Fix the build", "outcome": "Fixed",
			"statements":     []string{"Always run make lint first."},
			"tool_sequences": []map[string]any{{"name": "verify", "steps": []string{"make lint", "make test"}, "succeeded": true}}}},
		{"memory_delete", map[string]any{"key": "scratch"}},
	}
	for _, c := range calls {
		res := call(t, cs, c.tool, c.args)
		if res.IsError {
			t.Fatalf("%s %v: %v", c.tool, c.args, res.Content)
		}
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if err := schemas[c.tool].Validate(v); err != nil {
			t.Errorf("%s %v: result does not match the output schema: %v\n%s", c.tool, c.args, err, b)
		}
	}
}
