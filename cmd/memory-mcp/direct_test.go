package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// lineSession is a server on a fresh database and workspace, served over
// a pipe by serveLines, driven one raw line at a time.
type lineSession struct {
	in     *io.PipeWriter
	direct *directCalls // nil when everything goes to the SDK
	frames chan string
	done   chan error
	hold   chan struct{} // closed to let the test's slow tool return
	once   sync.Once
}

var fixedNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// startLines serves a real app whose store's clock stands still, with
// tools of the test's own besides ours: one that echoes text the encoder
// must escape, one with no content, one that panics, one that fails with
// a protocol error, and one that waits to be cancelled or released.
func startLines(t *testing.T, direct bool) *lineSession {
	t.Helper()
	root := t.TempDir()
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "memory.db"), Root: root, Project: scope.IdentityOf(root), TokenBudget: 1500, Confirmations: 2}
	log := slog.New(slog.DiscardHandler)
	a, err := openAppWith(context.Background(), cfg, log, &memory.Options{Now: func() time.Time { return fixedNow }})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(a, log)
	ls := &lineSession{frames: make(chan string, 16), done: make(chan error, 1), hold: make(chan struct{})}
	obj := &jsonschema.Schema{Type: "object"}
	srv.AddTool(&mcp.Tool{Name: "test_echo", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "<b>&amp; ünïcode \u2028 " + string(req.Params.Arguments) + "</b>"}},
			StructuredContent: map[string]any{"html": "<a href=\"x&y\">", "n": 1.5}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "test_empty", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "test_panic", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		panic("test panic")
	})
	srv.AddTool(&mcp.Tool{Name: "test_fail", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: 123, Message: "protocol failure"}
	})
	srv.AddTool(&mcp.Tool{Name: "test_wait", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cancelled"}}, IsError: true}, nil
		case <-ls.hold:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
		}
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ls.in = inW
	ctx, cancel := context.WithCancel(context.Background())
	c := newStdioConn(outW)
	if direct {
		c.direct = newDirectCalls(ctx, srv)
		ls.direct = c.direct
	}
	go func() {
		ls.done <- serveConn(ctx, srv.mcp, c, inR, log)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			ls.frames <- sc.Text()
		}
		close(ls.frames)
	}()
	t.Cleanup(func() {
		ls.once.Do(func() { close(ls.hold) })
		inW.Close()
		select {
		case <-ls.done:
		case <-time.After(20 * time.Second):
			t.Error("server still running 20 s after its input closed")
		}
		cancel()
		a.Close()
	})
	return ls
}

func (ls *lineSession) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(ls.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (ls *lineSession) next(t *testing.T) string {
	t.Helper()
	select {
	case f, ok := <-ls.frames:
		if !ok {
			t.Fatal("output ended")
		}
		return f
	case <-time.After(20 * time.Second):
		t.Fatal("no answer in 20 s")
	}
	return ""
}

// freshID matches the random part of a record id made in the run; the
// two sessions' ids differ only in it.
var freshID = regexp.MustCompile(`\b([0-9A-HJKMNP-TV-Z]{10})[0-9A-HJKMNP-TV-Z]{16}\b`)

func maskIDs(f string) string { return freshID.ReplaceAllString(f, "${1}RANDOMRANDOMRAND") }

// TestDirectCallsAnswerAsTheSDK sends the same lines to a server that
// answers plain tool calls itself and to one that leaves everything to the
// SDK, and compares every frame written, byte for byte; the only thing
// masked is the random part of the new records' ids, drawn afresh in each.
func TestDirectCallsAnswerAsTheSDK(t *testing.T) {
	secret := "ghp_" + strings.Repeat("aB3dE5", 6)
	call := func(id int, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
	}
	meta := `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	metaCall := func(id int, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":%q,"arguments":%s}}`, id, meta, name, args)
	}
	calls := func(newer bool) []string {
		c := call
		if newer {
			c = metaCall
		}
		return []string{
			c(10, "memory_write", `{"type":"semantic","key":"test-runner","description":"How <tests> run & pass","body":"Run make test.","tags":["testing"]}`),
			c(11, "memory_write", `{"type":"working","key":"note","body":"scratch","confidence":0.25,"ttl_seconds":60,"metadata":{"a":"b"}}`),
			c(12, "memory_write", `{"type":"semantic","key":"test-runner","body":"Run make test-all."}`),
			c(13, "memory_read", `{"key":"test-runner"}`),
			c(14, "memory_read", `{"key":"missing"}`),
			c(15, "memory_read", `{"key":5}`),
			c(16, "memory_read", `{"bogus":1}`),
			c(17, "memory_read", `{"key":"x","query":"y"}`),
			c(18, "memory_write", `{"type":"semantic","key":"leak","body":"token `+secret+`"}`),
			c(19, "memory_write", `{"type":"semantic","key":"`+secret+`","body":"b"}`),
			c(20, "memory_write", `{"type":"nonsense","key":"k","body":"b"}`),
			c(21, "memory_write", `{"type":"working","key":"k","body":"b","ttl_seconds":0}`),
			c(22, "memory_search", `{"query":"make test","limit":5}`),
			c(23, "memory_search", `{"query":""}`),
			c(24, "memory_list", `{"limit":10}`),
			c(25, "memory_list", `{"limit":9999}`),
			c(26, "memory_update", `{"key":"note","body":"changed","tags":["a","b"]}`),
			c(27, "memory_update", `{"key":"nothing-here","body":"x"}`),
			c(28, "memory_delete", `{"key":"note","type":"working"}`),
			c(29, "memory_read", `{}`),
			c(30, "memory_capture", `{"session_id":"s1","plan":"p","outcome":"o","statements":["Always run make lint"]}`),
			c(31, "test_echo", `{"x":"<&>"}`),
			c(32, "test_empty", `{}`),
			c(33, "test_panic", `{}`),
			c(34, "test_fail", `{}`),
			c(35, "no_such_tool", `{}`),
			c(36, "memory_read", `[]`),
			c(37, "memory_read", `null`),
			`{"jsonrpc":"2.0","id":"str-id","method":"tools/call","params":{"name":"memory_read","arguments":{"key":"test-runner"}}}`,
			`{"jsonrpc":"2.0","id":38,"method":"tools/call","params":{"name":"memory_read"}}`,
			`{"jsonrpc":"2.0","id":39,"method":"tools/call","params":{"_meta":{"progressToken":"p1"},"name":"memory_read","arguments":{"key":"test-runner"}}}`,
			`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"memory_read","arguments":{"key":"test-runner"},"extra":1}}`,
			`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":7}}`,
			`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"memory_read","arguments":{"key":"test-runner"}}}`,
			`{"jsonrpc":"2.0","id":42,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":43,"method":"resources/read","params":{"uri":"memory://project/semantic/test-runner"}}`,
			c(44, "memory_read", `{"key":"test-runner","type":"semantic","scope":"project"}`),
		}
	}
	type script struct {
		name  string
		start []string // lines whose answers are compared but not counted
		lines []string
	}
	scripts := []script{
		{"initialize", []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		}, calls(false)},
		{"discover", []string{
			`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`,
		}, calls(true)},
		{"before initialize", nil, []string{call(2, "memory_read", `{"key":"x"}`)}},
	}
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			taken := int64(0)
			run := func(direct bool) []string {
				ls := startLines(t, direct)
				if direct {
					defer func() { taken = ls.direct.taken.Load() }()
				}
				var got []string
				for _, l := range append(append([]string{}, sc.start...), sc.lines...) {
					ls.send(t, l)
					var m map[string]any
					json.Unmarshal([]byte(l), &m)
					if _, isCall := m["id"]; !isCall {
						continue
					}
					got = append(got, maskIDs(ls.next(t)))
				}
				return got
			}
			sdk, direct := run(false), run(true)
			if len(sdk) != len(direct) {
				t.Fatalf("%d frames through the SDK, %d direct", len(sdk), len(direct))
			}
			for i := range sdk {
				if sdk[i] != direct[i] {
					t.Errorf("frame %d differs\nSDK:    %s\ndirect: %s", i, sdk[i], direct[i])
				}
			}
			if sc.name == "before initialize" {
				if taken != 0 {
					t.Errorf("%d calls answered directly before initialize", taken)
				}
				return
			}
			if !strings.Contains(strings.Join(sdk, "\n"), `secret_rejected`) {
				t.Error("no secret was refused")
			}
			// Every call of a known tool with object arguments or none, and
			// no other params, is taken; with a _meta, all but the first,
			// which the SDK must accept first.
			want := int64(28)
			if sc.name == "discover" {
				want = 27
			}
			if taken != want {
				t.Errorf("%d calls answered directly, want %d", taken, want)
			}
		})
	}
}

// TestDirectCallsAreTaken: the calls the equivalence test sends do take
// the direct path where they should, so that test compares two paths.
func TestDirectCallsAreTaken(t *testing.T) {
	ls := startLines(t, true)
	ls.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	ls.next(t)
	ls.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// test_wait answers only when cancelled or released: a call of it
	// cancelled through the direct path proves the path holds it.
	ls.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_wait","arguments":{}}}`)
	// The same id again, while the first still runs, is dropped, as the
	// SDK drops it: the next frame is the next ping's.
	ls.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	ls.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if f := ls.next(t); f != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Errorf("after a duplicate id: %s", f)
	}
	ls.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}}`)
	got := ls.next(t)
	if want := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"invalid_argument: cancelled"}],"isError":true}}`; got != want {
		t.Errorf("cancelled call: %s\nwant %s", got, want)
	}
}

// TestCancelAndDuplicateAsTheSDK cancels a running call, and sends a
// second call with the id of one still running, through both paths: the
// SDK answers neither duplicate, and neither does the direct path.
func TestCancelAndDuplicateAsTheSDK(t *testing.T) {
	for _, direct := range []bool{false, true} {
		ls := startLines(t, direct)
		ls.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		ls.next(t)
		ls.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"test_wait","arguments":{}}}`)
		// Until the call runs its id is not known to be in use; a ping
		// answered after it was sent shows the SDK has read it.
		ls.send(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"p","result":{}}` {
			t.Fatalf("direct=%v: ping: %s", direct, f)
		}
		// A call with the id of one still running is dropped unanswered.
		ls.send(t, `{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"memory_list","arguments":{}}}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"w","method":"ping"}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
		if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"p1","result":{}}` {
			t.Fatalf("direct=%v: after duplicates: %s", direct, f)
		}
		ls.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w"}}`)
		if f, want := ls.next(t), `{"jsonrpc":"2.0","id":"w","result":{"content":[{"type":"text","text":"invalid_argument: cancelled"}],"isError":true}}`; f != want {
			t.Errorf("direct=%v: cancelled: %s\nwant %s", direct, f, want)
		}
		// A call not cancelled runs to its end.
		ls.send(t, `{"jsonrpc":"2.0","id":"w2","method":"tools/call","params":{"name":"test_wait","arguments":{}}}`)
		ls.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"other"}}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"p2","method":"ping"}`)
		if f := ls.next(t); f != `{"jsonrpc":"2.0","id":"p2","result":{}}` {
			t.Fatalf("direct=%v: ping: %s", direct, f)
		}
		ls.once.Do(func() { close(ls.hold) })
		if f, want := ls.next(t), `{"jsonrpc":"2.0","id":"w2","result":{"content":[{"type":"text","text":"released"}]}}`; f != want {
			t.Errorf("direct=%v: released: %s\nwant %s", direct, f, want)
		}
	}
}

// TestAnswerFrameEncodesAsTheSDK compares answerFrame with the SDK's own
// encoding of a response, for ids of each kind and results with and
// without a result type.
func TestAnswerFrameEncodesAsTheSDK(t *testing.T) {
	sc, err := json.Marshal(map[string]any{"x": "<y> & \u2028 \"z\"", "n": 0.25, "l": []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	results := []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: "a <b> & \u2028"}}, StructuredContent: json.RawMessage(`{"x":"<y>"}`)},
		// written by answerFrame itself
		{Content: []mcp.Content{&mcp.TextContent{Text: "a <b> & \u2028\n\"c\"\t\x01"}}, StructuredContent: compactJSON(sc)},
		{Content: []mcp.Content{&mcp.TextContent{Text: "one"}, &mcp.TextContent{Text: ""}}, StructuredContent: compactJSON(sc), IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: "no structured content"}}},
		{Content: []mcp.Content{}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "meta"}}, StructuredContent: compactJSON(sc),
			Meta: mcp.Meta{"k": "<v>", mcp.MetaKeyServerInfo: &mcp.Implementation{Name: "memory-mcp", Version: "1"}}},
		// left to the SDK's encoding
		{Content: []mcp.Content{&mcp.TextContent{Text: "state"}}, RequestState: "s"},
		{Content: []mcp.Content{&mcp.TextContent{Text: "annotated", Annotations: &mcp.Annotations{Priority: 1}}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
	}
	for i, res := range results {
		var b bytes.Buffer
		if direct := appendToolResult(&b, res); direct != (i >= 1 && i <= 5) {
			t.Errorf("result %d: written directly: %v", i, direct)
		}
		for _, raw := range []any{float64(1), float64(-9007199254740992), "id <&>", "ü"} {
			checkAnswerFrame(t, fmt.Sprintf("result %d, id %v", i, raw), raw, res)
		}
	}
	id, _ := jsonrpc.MakeID(float64(3))
	got, err := answerFrame(id, nil, errors.New("boom"), false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: errors.New("boom")})
	if string(got) != string(want) {
		t.Errorf("error:\n got %s\nwant %s", got, want)
	}
}

func checkAnswerFrame(t *testing.T, what string, raw any, res *mcp.CallToolResult) {
	t.Helper()
	id, err := jsonrpc.MakeID(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := answerFrame(id, res, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK's connection: the result through its encoder (no HTML
	// escaping) into the response, then the response.
	var enc strings.Builder
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(res); err != nil {
		t.Fatal(err)
	}
	want, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: json.RawMessage(strings.TrimSuffix(enc.String(), "\n"))})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// BenchmarkDirectCall is one memory_read by key through the server's
// stdio layer, answered directly or by the SDK.
func BenchmarkDirectCall(b *testing.B) {
	for _, direct := range []bool{true, false} {
		b.Run(fmt.Sprintf("direct=%v", direct), func(b *testing.B) {
			benchLines(b, direct)
		})
	}
}

func benchLines(b *testing.B, direct bool) {
	root := b.TempDir()
	cfg := Config{DBPath: filepath.Join(b.TempDir(), "memory.db"), Root: root, Project: scope.IdentityOf(root), TokenBudget: 1500, Confirmations: 2}
	log := slog.New(slog.DiscardHandler)
	a, err := openApp(context.Background(), cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	srv := newServer(a, log)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	c := newStdioConn(outW)
	if direct {
		c.direct = newDirectCalls(context.Background(), srv)
	}
	go func() { done <- serveConn(context.Background(), srv.mcp, c, inR, log); outW.Close() }()
	b.Cleanup(func() { inW.Close(); <-done })
	out := bufio.NewReaderSize(outR, 1<<16)
	roundTrip := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
		if _, err := out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"working","key":"k","body":"a note of a few words"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_read","arguments":{"key":"k"}}}`)
	}
}

// TestArgumentsDecodeAlike: arguments that pass validation decode into a
// tool's input the same straight from the request as from their
// re-encoding, whenever the straight decode is used.
func TestArgumentsDecodeAlike(t *testing.T) {
	cases := []string{
		`{"type":"semantic","key":"k","body":"b"}`,
		`{"type":"working","key":"k","body":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/","confidence":0.1,"ttl_seconds":60}`,
		`{"type":"working","key":"k","body":"b","confidence":1e-1,"ttl_seconds":6e1}`,
		`{"type":"working","key":"k","body":"b","confidence":0.30000000000000004}`,
		`{"type":"working","key":"k","body":"b","ttl_seconds":60.0}`,
		`{"type":"working","key":"k","body":"b","tags":null,"metadata":null,"confidence":null}`,
		`{"type":"working","key":"k","body":"b","tags":["a","a"],"metadata":{"x":"1","x":"2"}}`,
		`{"type":"working","key":"k","key":"k2","body":"b"}`,
		"{\"type\":\"working\",\"key\":\"k\",\"body\":\"\xff\xfe bad utf-8\"}",
		`{"type":"working","key":"k","body":"b","ttl_seconds":1234567890}`,
	}
	readCases := []string{
		`{"key":"k"}`,
		`{"query":"q","max_tokens":9007199254740993}`,
		`{"query":"q","max_tokens":123456789012345}`,
		`{"query":"q","types":["semantic"],"max_tokens":1e3}`,
	}
	s := schemaFor[writeIn](nil)
	decodeBoth(t, s, cases, func() any { return new(writeIn) })
	decodeBoth(t, schemaFor[readIn](nil), readCases, func() any { return new(readIn) })
	if !exactNumbers([]byte(`{"a":123456789012345,"b":"9999999999999999999"}`)) || exactNumbers([]byte(`{"a":1234567890123456}`)) {
		t.Error("exactNumbers misjudges a number's length")
	}
}

// resolveArgs resolves a tool's input schema s as addTool does: whole,
// and each of its properties for argumentError.
func resolveArgs(t testing.TB, s *jsonschema.Schema) (*jsonschema.Resolved, map[string]*jsonschema.Resolved) {
	t.Helper()
	in, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]*jsonschema.Resolved{}
	for name, p := range s.Properties {
		if fields[name], err = p.Resolve(nil); err != nil {
			t.Fatal(err)
		}
	}
	return in, fields
}

// applyArguments is checkArguments through the validator alone, its
// result encoded again: the way arguments went before they decoded
// straight into a tool's input.
func applyArguments(raw json.RawMessage, resolved *jsonschema.Resolved, schema *jsonschema.Schema, fields map[string]*jsonschema.Resolved) (json.RawMessage, error) {
	args, err := checkArguments(raw, resolved, schema, fields, nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(args)
}

func decodeBoth(t *testing.T, s *jsonschema.Schema, cases []string, zero func() any) {
	t.Helper()
	in, fields := resolveArgs(t, s)
	if hasDefaults(s) {
		t.Fatal("a schema has defaults: the straight decode is never used")
	}
	for _, raw := range cases {
		args, err := applyArguments(json.RawMessage(raw), in, s, fields)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		slow, fast := zero(), zero()
		slowErr := json.Unmarshal(args, slow)
		if !exactNumbers([]byte(raw)) || json.Unmarshal([]byte(raw), fast) != nil {
			continue // the slow way it is
		}
		if slowErr != nil {
			t.Errorf("%s: decodes straight but not re-encoded: %v", raw, slowErr)
			continue
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Errorf("%s: decoded differently (-re-encoded +straight):\n%s", raw, diff)
		}
	}
}

// TestDirectMetasStayFew: a client whose every call carries a new _meta
// (a progress token) is answered by the SDK each time, and the accepted
// values kept stay bounded.
func TestDirectMetasStayFew(t *testing.T) {
	ls := startLines(t, true)
	ls.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	ls.next(t)
	ls.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := range 3 * maxMetas {
		ls.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":%d},"name":"memory_list","arguments":{}}}`, 10+i, i))
		if f := ls.next(t); !strings.Contains(f, `"structuredContent"`) {
			t.Fatalf("call %d: %s", i, f)
		}
	}
	ls.direct.mu.Lock()
	n, w := len(ls.direct.metas), len(ls.direct.watching)
	ls.direct.mu.Unlock()
	if n > maxMetas || w != 0 {
		t.Errorf("%d accepted _meta values kept, %d calls watched; want at most %d and none", n, w, maxMetas)
	}
	if got := ls.direct.taken.Load(); got != 0 {
		t.Errorf("%d calls with a new _meta each answered directly", got)
	}
}

// BenchmarkAnswerFrame encodes a search-sized tool result into its answer
// frame, directly and as the SDK's connection does (the result through its
// encoder, then the response).
func BenchmarkAnswerFrame(b *testing.B) {
	hits := make([]searchHit, 10)
	for i := range hits {
		hits[i] = searchHit{ID: "01JABCDEFGHJKMNPQRSTVWXYZ", Key: "some-key", Type: "semantic", Scope: "project",
			Description: "a description of the record", Score: 0.5,
			Preview: "a preview of the body of the record, about two hundred bytes long, with the matched words in it and some more words after them to fill it up to size",
			Why:     why{Terms: []string{"preview", "body"}, Fields: []string{"body"}}}
	}
	sc, _ := json.Marshal(searchOut{Results: hits, Mode: "keyword"})
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(sc)}}, StructuredContent: compactJSON(sc)}
	id, _ := jsonrpc.MakeID(float64(12))
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := answerFrame(id, res, nil, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf strings.Builder
			e := json.NewEncoder(&buf)
			e.SetEscapeHTML(false)
			if err := e.Encode(res); err != nil {
				b.Fatal(err)
			}
			if _, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: json.RawMessage(strings.TrimSuffix(buf.String(), "\n"))}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSearchResultDecode is the go-sdk client's side of a search:
// decoding the answer frame of ten hits and the tool result in it, with
// previews marked by ASCII dots as the store writes them, and by "…". A
// string holding a byte outside ASCII takes the SDK's JSON decoder's
// slower path.
func BenchmarkSearchResultDecode(b *testing.B) {
	for _, mark := range []string{"...", "…"} {
		b.Run("mark="+mark, func(b *testing.B) {
			preview := mark + "a preview of the body of the record, about one hundred and sixty bytes long, with the matched words in it and some more words after them to fill" + mark
			hits := make([]searchHit, 10)
			var text strings.Builder
			for i := range hits {
				hits[i] = searchHit{ID: "01JABCDEFGHJKMNPQRSTVWXYZ", Key: "some-key-name-12", Type: "semantic", Scope: "project",
					Description: "a description of the record with some words", Score: 0.5581, Preview: preview,
					Why: why{Terms: []string{"preview", "body", "words"}, Fields: []string{"body"}}}
				text.WriteString("- some-key-name-12 [semantic, project] score 0.56: " + preview + "\n")
			}
			sc, err := json.Marshal(searchOut{Results: hits, Mode: "keyword"})
			if err != nil {
				b.Fatal(err)
			}
			id, _ := jsonrpc.MakeID(float64(12))
			frame, err := answerFrame(id, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, StructuredContent: compactJSON(sc)}, nil, false)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				msg, err := jsonrpc.DecodeMessage(frame)
				if err != nil {
					b.Fatal(err)
				}
				var r mcp.CallToolResult
				if err := json.Unmarshal(msg.(*jsonrpc.Response).Result, &r); err != nil {
					b.Fatal(err)
				}
				if len(r.Content) != 1 || r.StructuredContent == nil {
					b.Fatalf("decoded %+v", r)
				}
			}
		})
	}
}

// TestDuplicateDoesNotVouchForItsMeta: a call reusing the id of one still
// running is dropped, and its _meta must not count as one the SDK accepted
// when the first call's answer goes out: a later call with that _meta (a
// protocol version the SDK refuses) is refused on both paths alike.
func TestDuplicateDoesNotVouchForItsMeta(t *testing.T) {
	meta := func(version string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `"}`
	}
	var frames [2][]string
	for i, direct := range []bool{false, true} {
		ls := startLines(t, direct)
		ls.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		ls.next(t)
		ls.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"test_wait","arguments":{},`+meta("2025-11-25")+`}}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		ls.next(t)
		ls.send(t, `{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"memory_list","arguments":{},`+meta("2099-01-01")+`}}`)
		ls.send(t, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
		ls.next(t)
		ls.once.Do(func() { close(ls.hold) })
		frames[i] = append(frames[i], ls.next(t))
		ls.send(t, `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"memory_list","arguments":{},`+meta("2099-01-01")+`}}`)
		frames[i] = append(frames[i], ls.next(t))
	}
	if diff := cmp.Diff(frames[0], frames[1]); diff != "" {
		t.Errorf("direct answers differ from the SDK's (-sdk +direct):\n%s", diff)
	}
}

// TestJSONScansSkipStrings: brackets, digits and escaped quotes inside
// strings count for neither scan.
func TestJSONScansSkipStrings(t *testing.T) {
	for _, c := range []struct {
		in    string
		depth int
		deep  bool // deeper than depth
		exact bool
	}{
		{`{"a":[1,[2]]}`, 3, false, true},
		{`{"a":[1,[2]]}`, 2, true, true},
		{`{"a":"[[[[\"]]]]{{{"}`, 1, false, true},
		{`{"a":"\\","b":[[1]]}`, 2, true, true},
		{`{"a":"\\\"12345678901234567890"}`, 1, false, true},
		{`{"a":"x","b":12345678901234567}`, 1, false, false},
		{`["unterminated`, 1, false, true},
	} {
		if got := !depthAtMost([]byte(c.in), c.depth); got != c.deep {
			t.Errorf("depthAtMost(%s, %d) = %v", c.in, c.depth, !got)
		}
		if got := exactNumbers([]byte(c.in)); got != c.exact {
			t.Errorf("exactNumbers(%s) = %v", c.in, got)
		}
	}
}
