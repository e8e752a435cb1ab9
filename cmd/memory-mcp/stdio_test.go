package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAnswerID holds the quick reading of outgoing frames to the full
// decode: every frame is classified the same way, with the same id.
func TestAnswerID(t *testing.T) {
	frames := []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":-42,"result":{"content":[{"type":"text","text":"\"id\":9"}]}}`,
		`{"jsonrpc":"2.0","id":"abc","error":{"code":-32600,"message":"Invalid Request"}}`,
		`{"jsonrpc":"2.0","id":"a\"b","result":{}}`,
		`{"jsonrpc":"2.0","id":"a\u0041","result":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":1e3,"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"memory://index"}}`,
		`{"id":3,"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":3,"params":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"","result":{}}`,
		"  {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n",
	}
	for _, f := range frames {
		got, ok := answerID([]byte(f))
		var env envelope
		wantOK := json.Unmarshal(bytes.TrimSpace([]byte(f)), &env) == nil && env.Method == nil && len(env.ID) > 0
		if ok != wantOK {
			t.Errorf("%s: answer %v, want %v", f, ok, wantOK)
			continue
		}
		if ok && canonicalID(got) != canonicalID(env.ID) {
			t.Errorf("%s: id %s, want %s", f, got, env.ID)
		}
	}
}

// TestFrameWriterSettlesSDKAnswers drives the SDK's own encoder: each
// answer it writes settles the request it answers, and nothing else.
func TestFrameWriterSettlesSDKAnswers(t *testing.T) {
	var out bytes.Buffer
	w := &frameWriter{w: &out, pending: map[string]bool{}}
	for _, id := range []string{`1`, `"one"`, `2`} {
		w.expect(json.RawMessage(id))
	}
	write := func(msg jsonrpc.Message) {
		t.Helper()
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
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
	w.mu.Lock()
	pending := len(w.pending)
	still := w.pending[canonicalID(json.RawMessage(`2`))]
	w.mu.Unlock()
	if pending != 1 || !still {
		t.Fatalf("pending %v, want only id 2", w.pending)
	}
	if n := bytes.Count(out.Bytes(), []byte("\n")); n != 3 {
		t.Fatalf("%d frames written, want 3", n)
	}
	done := make(chan struct{})
	go func() { w.drain(time.Minute); close(done) }()
	write(&jsonrpc.Response{ID: id2, Result: json.RawMessage(`{}`)})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("drain still waits after the last answer")
	}
}

// BenchmarkFrameWriter writes a search-sized answer through the writer
// that tracks pending requests.
func BenchmarkFrameWriter(b *testing.B) {
	hits := make([]map[string]any, 10)
	for i := range hits {
		hits[i] = map[string]any{"id": "01JABCDEFGHJKMNPQRSTVWXYZ", "key": "some-key", "type": "semantic", "scope": "project",
			"description": "a description of the record", "score": 0.5,
			"preview": "a preview of the body of the record, about two hundred bytes long, with the matched words in it and some more words after them to fill it up to size",
			"why":     map[string]any{"terms": []string{"preview", "body"}, "fields": []string{"body"}}}
	}
	res, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{"results": hits}})
	id, _ := jsonrpc.MakeID(float64(1))
	frame, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: res})
	if err != nil {
		b.Fatal(err)
	}
	frame = append(frame, '\n')
	w := &frameWriter{w: discard{}, pending: map[string]bool{}}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		w.expect(json.RawMessage(`1`))
		w.Write(frame)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkForward checks one tools/call line on its way to the SDK.
func BenchmarkForward(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"how do we run the integration tests","limit":10}}}`)
	w := &frameWriter{w: discard{}, pending: map[string]bool{}}
	log := slog.New(slog.DiscardHandler)
	buf := make([]byte, 0, 1024)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		buf = append(buf[:0], line...)
		if err := forward(buf, discard{}, w, log); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlainRequestsDecode holds plainRequest to the SDK's decoder: every
// line it lets through without a trial decodes there as a request, and
// the lines it sends to a trial include those the decoder refuses.
func TestPlainRequestsDecode(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"memory_read","arguments":{"key":"k"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping","params":5}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping","params":[1,2,{"a":null}]}`,
		`{"jsonrpc":"2.0","id":4,"method":"","params":{}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"s":"\ud800 \u0000 \\\" [[[[ {{{"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"n":1e400,"m":-0.0e-7}}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping","params":` + nest(998) + `}`,
		`{"jsonrpc":"2.0","id":8,"method":"ping","params":` + nest(999) + `}`,
		`{"jsonrpc":"2.0","id":9,"method":"ping","params":` + nest(1000) + `}`,
		`{"jsonrpc":"2.0","id":10,"method":"ping","params":{"s":"` + strings.Repeat("[", 2000) + `"}}`,
		`{"jsonrpc":"2.0","id":11,"method":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":12,"method":7}`,
		`{"jsonrpc":"2.0","id":13,"method":"ping","error":5}`,
		`{"jsonrpc":"2.0","id":14,"error":{"code":"x","message":7}}`,
		`{"jsonrpc":"2.0","id":15,"result":{}}`,
		`{"jsonrpc":"2.0","id":16,"id":17,"method":"ping","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":18,"method":"ping","result":{},"extra":[1]}`,
		` {"jsonrpc" : "2.0" , "id" : 19 , "method" : "ping" } `,
	}
	plain := 0
	for _, line := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("%.60s: %v", line, err)
		}
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		if !plainRequest(obj, []byte(line)) {
			continue
		}
		plain++
		if err != nil {
			t.Errorf("%.60s: taken without a trial, but the SDK refuses it: %v", line, err)
			continue
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			t.Errorf("%.60s: the SDK reads %T, not a request", line, msg)
			continue
		}
		if want := string(obj["id"]) != "null" && obj["id"] != nil; req.ID.IsValid() != want {
			t.Errorf("%.60s: id valid %v, want %v", line, req.ID.IsValid(), want)
		}
	}
	if plain < 12 {
		t.Fatalf("only %d lines taken without a trial", plain)
	}
	for _, line := range []string{`{"jsonrpc":"2.0","id":9,"method":"ping","params":` + nest(1000) + `}`, `{"jsonrpc":"2.0","id":13,"method":"ping","error":5}`} {
		var obj map[string]json.RawMessage
		json.Unmarshal([]byte(line), &obj)
		if plainRequest(obj, []byte(line)) {
			t.Errorf("%.60s: taken without a trial", line)
		}
	}
}
