package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPlainMessagesDecodeAlike holds the filter's own decoding to the
// SDK's decoder: every line it decodes itself, the SDK takes too, and
// reads as the same request; the lines it leaves to the SDK include those
// the SDK refuses.
func TestPlainMessagesDecodeAlike(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"memory_read","arguments":{"key":"k"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-9007199254740992,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"\u00e9\"","method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping","params":5}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping","params":null}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping","params":[1,2,{"a":null}]}`,
		`{"jsonrpc":"2.0","id":4,"method":"","params":{}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"s":"\ud800 \u0000 \\\" [[[[ {{{"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"n":1e400,"m":-0.0e-7}}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":` + nest(998) + `}}`,
		`{"jsonrpc":"2.0","id":8,"method":"ping","params":{"a":` + nest(999) + `}}`,
		`{"jsonrpc":"2.0","id":10,"method":"ping","params":{"s":"` + strings.Repeat("[", 2000) + `"}}`,
		`{"jsonrpc":"2.0","id":11,"method":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":12,"method":7}`,
		`{"jsonrpc":"2.0","id":12,"method":"p\u0069ng"}`,
		`{"jsonrpc":"2.0","id":13,"method":"ping","error":5}`,
		`{"jsonrpc":"2.0","id":14,"error":{"code":"x","message":7}}`,
		`{"jsonrpc":"2.0","id":15,"result":{}}`,
		`{"jsonrpc":"2.0","id":16,"id":17,"method":"ping","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":18,"method":"ping","result":{},"extra":[1]}`,
		` {"jsonrpc" : "2.0" , "id" : 19 , "method" : "ping" , "params" : { "a" : 1 } } `,
	}
	plain := 0
	for _, line := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("%.60s: %v", line, err)
		}
		got, ok := plainMessage(obj, []byte(line))
		if !ok {
			continue
		}
		plain++
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			t.Errorf("%.60s: decoded here, but the SDK refuses it: %v", line, err)
			continue
		}
		want, ok := msg.(*jsonrpc.Request)
		if !ok {
			t.Errorf("%.60s: the SDK reads %T, not a request", line, msg)
			continue
		}
		if got.Method != want.Method || got.ID != want.ID || !bytes.Equal(compact(t, got.Params), compact(t, want.Params)) {
			t.Errorf("%.60s: read as %q %v %s, the SDK reads %q %v %s", line, got.Method, got.ID.Raw(), got.Params, want.Method, want.ID.Raw(), want.Params)
		}
	}
	if plain < 12 {
		t.Fatalf("only %d lines decoded here", plain)
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":` + nest(1000) + `}}`,
		`{"jsonrpc":"2.0","id":13,"method":"ping","error":5}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping","params":5}`,
	} {
		var obj map[string]json.RawMessage
		json.Unmarshal([]byte(line), &obj)
		if _, ok := plainMessage(obj, []byte(line)); ok {
			t.Errorf("%.60s: decoded here, not by the SDK", line)
		}
	}
}

func compact(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestStdioConnSettlesAnswers writes through the connection as the SDK
// does: each answer settles the request it answers, and nothing else, and
// drain returns once the last is written.
func TestStdioConnSettlesAnswers(t *testing.T) {
	var out bytes.Buffer
	c := newStdioConn(&out)
	for _, id := range []string{`1`, `"one"`, `2`} {
		c.expect(json.RawMessage(id))
	}
	ctx := context.Background()
	write := func(msg jsonrpc.Message) {
		t.Helper()
		if err := c.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	id1, _ := jsonrpc.MakeID(float64(1))
	idOne, _ := jsonrpc.MakeID("one")
	id2, _ := jsonrpc.MakeID(float64(2))
	write(&jsonrpc.Request{ID: id2, Method: "ping"}) // a request of ours with a pending id
	res, _ := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"jsonrpc":"2.0","id":2,"result":{}}`}}})
	write(&jsonrpc.Response{ID: id1, Result: res})
	write(&jsonrpc.Response{ID: idOne, Error: &jsonrpc.Error{Code: 1, Message: "no"}})
	c.mu.Lock()
	pending := len(c.pending)
	still := c.pending[canonicalID(json.RawMessage(`2`))]
	c.mu.Unlock()
	if pending != 1 || !still {
		t.Fatalf("pending %v, want only id 2", c.pending)
	}
	frames := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(frames) != 3 {
		t.Fatalf("%d frames written, want 3", len(frames))
	}
	for _, f := range frames {
		if _, err := jsonrpc.DecodeMessage([]byte(f)); err != nil {
			t.Fatalf("frame %s: %v", f, err)
		}
	}
	done := make(chan struct{})
	go func() { c.drain(time.Minute); close(done) }()
	write(&jsonrpc.Response{ID: id2, Result: json.RawMessage(`{}`)})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("drain still waits after the last answer")
	}
}

// TestStdioConnEnds: the SDK's reader sees every message delivered, then
// the end of the input, or the error that ended it; Close unblocks it.
func TestStdioConnEnds(t *testing.T) {
	c := newStdioConn(io.Discard)
	go func() {
		c.deliver(&jsonrpc.Request{Method: "a"})
		c.deliver(&jsonrpc.Request{Method: "b"})
		c.end(nil)
	}()
	ctx := context.Background()
	for _, want := range []string{"a", "b"} {
		msg, err := c.Read(ctx)
		if err != nil || msg.(*jsonrpc.Request).Method != want {
			t.Fatalf("read %v, %v; want %s", msg, err, want)
		}
	}
	if _, err := c.Read(ctx); err != io.EOF {
		t.Fatalf("after the input: %v, want EOF", err)
	}
	c = newStdioConn(io.Discard)
	c.end(io.ErrUnexpectedEOF)
	if _, err := c.Read(ctx); err != io.ErrUnexpectedEOF {
		t.Fatalf("after a failed read: %v", err)
	}
	c = newStdioConn(io.Discard)
	go func() { time.Sleep(10 * time.Millisecond); c.Close() }()
	if _, err := c.Read(ctx); err != io.EOF {
		t.Fatalf("after Close: %v, want EOF", err)
	}
	if err := c.deliver(&jsonrpc.Request{Method: "late"}); err == nil {
		t.Fatal("delivered after Close")
	}
}

// BenchmarkForward checks and decodes one tools/call line on its way to
// the SDK.
func BenchmarkForward(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"how do we run the integration tests","limit":10}}}`)
	c := newStdioConn(io.Discard)
	go func() {
		for {
			if _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	b.Cleanup(func() { c.Close() })
	log := slog.New(slog.DiscardHandler)
	buf := make([]byte, 0, 1024)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		buf = append(buf[:0], line...)
		if err := forward(buf, c, log); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStdioWrite writes a search-sized answer through the connection.
func BenchmarkStdioWrite(b *testing.B) {
	hits := make([]map[string]any, 10)
	for i := range hits {
		hits[i] = map[string]any{"id": "01JABCDEFGHJKMNPQRSTVWXYZ", "key": "some-key", "type": "semantic", "scope": "project",
			"description": "a description of the record", "score": 0.5,
			"preview": "a preview of the body of the record, about two hundred bytes long, with the matched words in it and some more words after them to fill it up to size",
			"why":     map[string]any{"terms": []string{"preview", "body"}, "fields": []string{"body"}}}
	}
	res, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{"results": hits}})
	id, _ := jsonrpc.MakeID(float64(1))
	msg := &jsonrpc.Response{ID: id, Result: res}
	c := newStdioConn(io.Discard)
	ctx := context.Background()
	b.SetBytes(int64(len(res)))
	b.ReportAllocs()
	for b.Loop() {
		c.expect(json.RawMessage(`1`))
		if err := c.Write(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
}
