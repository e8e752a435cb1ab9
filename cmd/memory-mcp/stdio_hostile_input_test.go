package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hostileSession drives the real binary over raw JSON lines, like
// rawSession, but never blocks for ever: frames arrive on a channel and
// every wait has a deadline, so a server that hangs or dies fails the test
// instead of stalling it.
type hostileSession struct {
	t      testing.TB
	cmd    *exec.Cmd
	in     io.WriteCloser
	frames chan map[string]any
	stderr *lockedBuffer
	seen   map[string]map[string]any // every frame with an id, by id
	done   chan struct{}             // closed once the process has exited
}

func startHostile(t testing.TB, e env) *hostileSession {
	t.Helper()
	return startHostileCmd(t, e.command())
}

// startHostileCmd is startHostile for a command line of the test's own.
func startHostileCmd(t testing.TB, cmd *exec.Cmd) *hostileSession {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileSession{t: t, cmd: cmd, in: in, frames: make(chan map[string]any, 1024), stderr: &lockedBuffer{}, seen: map[string]map[string]any{}, done: make(chan struct{})}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer func() {
			close(h.frames)
			cmd.Wait()
			close(h.done)
		}()
		r := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var m map[string]any
				if jerr := json.Unmarshal(line, &m); jerr != nil {
					m = map[string]any{"__not_json": string(line)}
				}
				h.frames <- m
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if !h.exit(15 * time.Second) {
			t.Error("server did not exit after stdin closed")
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", clipLog(h.stderr.String()))
		}
	})
	return h
}

// exit closes stdin and reports whether the server exited within timeout;
// if not, it is killed.
func (h *hostileSession) exit(timeout time.Duration) bool {
	h.in.Close()
	go func() {
		for range h.frames { // keep stdout drained
		}
	}()
	select {
	case <-h.done:
		return true
	case <-time.After(timeout):
		h.cmd.Process.Kill()
		<-h.done
		return false
	}
}

func clipLog(s string) string {
	if len(s) > 8000 {
		return s[:4000] + "\n…\n" + s[len(s)-4000:]
	}
	return s
}

func (h *hostileSession) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatalf("writing to the server: %v (it has died?)\nstderr: %s", err, clipLog(h.stderr.String()))
	}
}

// await reads frames until the one with id (its JSON form) arrives, and
// returns the frames seen on the way. It fails the test when the server
// closes stdout or sends nothing useful within the timeout.
func (h *hostileSession) await(id string, timeout time.Duration) (map[string]any, []map[string]any) {
	h.t.Helper()
	if m, ok := h.seen[id]; ok {
		return m, nil
	}
	var others []map[string]any
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-h.frames:
			if !ok {
				h.t.Fatalf("the server closed stdout while we waited for id %s (it died)\nstderr: %s", id, clipLog(h.stderr.String()))
			}
			if raw, isJunk := m["__not_json"]; isJunk {
				h.t.Fatalf("stdout carried a non-JSON line: %.200q", raw)
			}
			if _, has := m["id"]; has {
				got, _ := json.Marshal(m["id"])
				h.seen[string(got)] = m
				if string(got) == id {
					return m, others
				}
			}
			others = append(others, m)
		case <-deadline:
			h.t.Fatalf("no answer with id %s within %v (the server hangs?)\nstderr: %s", id, timeout, clipLog(h.stderr.String()))
		}
	}
}

// hostileLine is one input and what must come back: reply is the id (in
// JSON) the answer must carry, "null" for an error that cannot name the
// request, or "" when dropping the line silently is as good as answering.
type hostileLine struct {
	name, line, reply string
}

func deepParams(id, depth int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"deep","body":"b","metadata":%s%s}}}`,
		id, strings.Repeat("[", depth), strings.Repeat("]", depth))
}

// TestHostileInputKeepsServing extends TestMalformedInputKeepsSession
// (which covers plain non-JSON, truncated JSON, a leading invalid UTF-8
// prefix, a NUL inside a string, batches, the wrong jsonrpc version, an
// object id, an unknown method, wrong argument types, 100,000 nested
// brackets and a 10 MB body) with what it leaves out: lines over the 16 MiB
// limit, requests before initialize, raw NUL bytes, invalid UTF-8 inside a
// string, messages that stdlib JSON accepts and the SDK's stricter decoder
// does not, and odd ids. After every input a ping must still be answered.
func TestHostileInputKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("sends over 60 MB of input")
	}
	e := newEnv(t)
	h := startHostile(t, e)

	before := []hostileLine{
		{"ping before initialize", `{"jsonrpc":"2.0","id":"pre-1","method":"ping"}`, `"pre-1"`},
		{"tools/list before initialize", `{"jsonrpc":"2.0","id":"pre-2","method":"tools/list"}`, `"pre-2"`},
		{"tools/call before initialize", `{"jsonrpc":"2.0","id":"pre-3","method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"before-init","body":"written before initialize"}}}`, `"pre-3"`},
		{"resources/read before initialize", `{"jsonrpc":"2.0","id":"pre-4","method":"resources/read","params":{"uri":"memory://index"}}`, `"pre-4"`},
		{"initialized notification before initialize", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""},
		{"initialize with params not an object", `{"jsonrpc":"2.0","id":"pre-5","method":"initialize","params":5}`, `"pre-5"`},
		{"garbage before initialize", "\x00\x01\x02garbage", "null"},
	}
	after := []hostileLine{
		{"line just over 16 MiB of junk", strings.Repeat("x", maxLine+1), "null"},
		{"17 MiB request", `{"jsonrpc":"2.0","id":101,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"huge","body":"` + strings.Repeat("y", 17<<20) + `"}}}`, "null"},
		{"10 MB of non-JSON", strings.Repeat("not json ", 10<<20/9), "null"},
		{"10 MB request with invalid UTF-8 at the end", `{"jsonrpc":"2.0","id":102,"method":"ping","params":{"pad":"` + strings.Repeat("z", 10<<20) + "\xc3\x28" + `"}}`, "null"},
		{"raw NUL bytes", "\x00\x00\x00\x00", "null"},
		{"NUL between tokens", "{\"jsonrpc\":\"2.0\",\x00\"id\":103,\"method\":\"ping\"}", "null"},
		{"invalid UTF-8 inside a string", "{\"jsonrpc\":\"2.0\",\"id\":104,\"method\":\"tools/call\",\"params\":{\"name\":\"memory_write\",\"arguments\":{\"type\":\"semantic\",\"key\":\"k\",\"body\":\"\xff\xfe\xfd\"}}}", "null"},
		{"overlong UTF-8 encoding of '/'", "{\"jsonrpc\":\"2.0\",\"id\":105,\"method\":\"tools/call\",\"params\":{\"name\":\"memory_write\",\"arguments\":{\"type\":\"semantic\",\"key\":\"a\xc0\xafb\",\"body\":\"b\"}}}", "null"},
		{"lone surrogate escape", `{"jsonrpc":"2.0","id":106,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"surrogate","body":"\ud800 and \udfff"}}}`, "106"},
		{"escaped NUL in key", `{"jsonrpc":"2.0","id":107,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"a\u0000b","body":"b"}}}`, "107"},
		{"byte order mark", "\ufeff{\"jsonrpc\":\"2.0\",\"id\":108,\"method\":\"ping\"}", ""},
		{"CRLF line end", "{\"jsonrpc\":\"2.0\",\"id\":109,\"method\":\"ping\"}\r", "109"},
		{"blank line", "   \t ", ""},
		{"upper-case member names", `{"JSONRPC":"2.0","ID":110,"METHOD":"ping"}`, ""},
		{"mixed-case method member", `{"jsonrpc":"2.0","id":111,"Method":"ping"}`, ""},
		{"nesting 1,001 deep inside params", deepParams(112, 1001), ""},
		{"nesting 9,000 deep inside params", deepParams(113, 9000), ""},
		{"nesting 20,000 deep inside params", deepParams(114, 20000), "null"},
		{"response whose error is not an object", `{"jsonrpc":"2.0","id":115,"error":5}`, ""},
		{"response whose error has the wrong shape", `{"jsonrpc":"2.0","id":116,"error":{"code":"x","message":7}}`, ""},
		{"response to nothing", `{"jsonrpc":"2.0","id":117,"result":{}}`, ""},
		{"method null with a result", `{"jsonrpc":"2.0","id":118,"method":null,"result":{}}`, ""},
		{"params a number", `{"jsonrpc":"2.0","id":119,"method":"ping","params":5}`, "119"},
		{"tools/call params an array", `{"jsonrpc":"2.0","id":120,"method":"tools/call","params":[1,2]}`, "120"},
		{"unknown tool", `{"jsonrpc":"2.0","id":121,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}`, "121"},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/launch_missiles"}`, ""},
		{"cancel for an unknown request", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999999}}`, ""},
		{"second initialize", strings.Replace(initLine, `"id":1`, `"id":122`, 1), "122"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "null"},
		{"id beyond 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, "null"},
		{"id beyond int64", `{"jsonrpc":"2.0","id":1e300,"method":"ping"}`, "null"},
		{"id out of float range", `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, "null"},
		{"negative id", `{"jsonrpc":"2.0","id":-123,"method":"ping"}`, "-123"},
		{"id with control characters", `{"jsonrpc":"2.0","id":"\u0000\n\u001b[2J","method":"ping"}`, `"\u0000\n\u001b[2J"`},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, "null"},
		{"duplicate members", `{"jsonrpc":"2.0","id":124,"id":125,"method":"ping","method":"tools/list"}`, ""},
		{"confidence a string", `{"jsonrpc":"2.0","id":126,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"k","body":"b","confidence":"high"}}}`, "126"},
		{"ttl overflowing int64", `{"jsonrpc":"2.0","id":127,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"working","key":"k","body":"b","ttl_seconds":1e30}}}`, "127"},
		{"ttl near max int64", `{"jsonrpc":"2.0","id":128,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"working","key":"ttl-big","body":"b","ttl_seconds":9223372036854775807}}}`, "128"},
		{"max_tokens huge", `{"jsonrpc":"2.0","id":129,"method":"tools/call","params":{"name":"memory_read","arguments":{"max_tokens":9223372036854775807}}}`, "129"},
		{"negative limit and junk cursor", `{"jsonrpc":"2.0","id":130,"method":"tools/call","params":{"name":"memory_list","arguments":{"limit":-1,"cursor":"\u0000%%%"}}}`, "130"},
		{"search with query syntax and a bad date", `{"jsonrpc":"2.0","id":131,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"\"*) OR 1=1 -- NEAR( key:*","since":"yesterday-ish"}}}`, "131"},
		{"resource outside the scheme", `{"jsonrpc":"2.0","id":132,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}`, "132"},
		{"resource with traversal", `{"jsonrpc":"2.0","id":133,"method":"resources/read","params":{"uri":"memory://project/semantic/..%2F..%2Fetc%2Fpasswd"}}`, "133"},
		{"prompt with bad max_tokens", `{"jsonrpc":"2.0","id":134,"method":"prompts/get","params":{"name":"recall","arguments":{"max_tokens":"lots"}}}`, "134"},
		{"subscribe to junk", `{"jsonrpc":"2.0","id":135,"method":"resources/subscribe","params":{"uri":"\u0000"}}`, "135"},
		{"logging/setLevel junk", `{"jsonrpc":"2.0","id":136,"method":"logging/setLevel","params":{"level":"apocalyptic"}}`, "136"},
	}

	tried, answered := 0, 0
	probe := 0
	try := func(in hostileLine) {
		t.Helper()
		tried++
		h.send(in.line)
		probe++
		pid := fmt.Sprintf(`"probe-%d"`, probe)
		h.send(`{"jsonrpc":"2.0","id":` + pid + `,"method":"ping"}`)
		_, others := h.await(pid, 60*time.Second)
		for _, o := range others {
			if o["error"] != nil || o["result"] != nil {
				answered++
				break
			}
		}
		if in.reply != "" && in.reply != "null" {
			if _, ok := h.seen[in.reply]; !ok {
				// Tool calls may finish after the ping; look again at the end.
				return
			}
		}
		if in.reply == "null" {
			found := false
			for _, o := range others {
				if id, has := o["id"]; has && id == nil && o["error"] != nil {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no error reply with id null before the next ping (got %v)", in.name, brief(others))
			}
		}
	}
	for _, in := range before {
		try(in)
	}
	h.send(initLine)
	if res, _ := h.await("1", 30*time.Second); res["result"] == nil {
		t.Fatalf("initialize after hostile input: %v", res)
	}
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, in := range after {
		try(in)
	}
	for _, in := range append(before, after...) {
		if in.reply == "" || in.reply == "null" {
			continue
		}
		res, _ := h.await(in.reply, 30*time.Second)
		if res["error"] == nil && res["result"] == nil {
			t.Errorf("%s: answer carries neither result nor error: %v", in.name, res)
		}
	}
	// Requests before initialize must not have done anything.
	for _, id := range []string{`"pre-2"`, `"pre-3"`, `"pre-4"`} {
		if h.seen[id]["error"] == nil {
			t.Errorf("request %s before initialize was served: %v", id, h.seen[id])
		}
	}
	h.send(`{"jsonrpc":"2.0","id":"final","method":"tools/call","params":{"name":"memory_read","arguments":{"key":"before-init"}}}`)
	res, _ := h.await(`"final"`, 30*time.Second)
	if r, _ := res["result"].(map[string]any); r == nil || r["isError"] != true {
		t.Errorf("a tools/call sent before initialize was carried out: %v", res)
	}
	h.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	res, _ = h.await(`"list"`, 30*time.Second)
	if tools, _ := res["result"].(map[string]any)["tools"].([]any); len(tools) != 7 {
		t.Fatalf("tools/list after hostile input: %v", res)
	}
	// Every request was answered, so closing stdin ends the server at
	// once: an id it could not echo would keep it waiting for 10 s.
	start := time.Now()
	if !h.exit(5 * time.Second) {
		t.Errorf("the server took over 5 s to exit after stdin closed: an answer it waits for never came")
	}
	elapsed := time.Since(start)
	t.Logf("hostile inputs tried: %d (+%d in TestMalformedInputKeepsSession); answered with an error or result: %d; the rest dropped; server kept serving after every one and exited %v after stdin closed",
		tried, 13, answered, elapsed.Round(time.Millisecond))
}

// brief shortens frames for a failure message.
func brief(frames []map[string]any) string {
	b, _ := json.Marshal(frames)
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// TestRefusalsCarryAJSONRPCCode: a request the SDK refuses with an error
// of its own (tools/list before initialize, a second initialize) is
// answered with a JSON-RPC error code, Invalid Request, never code 0.
func TestRefusalsCarryAJSONRPCCode(t *testing.T) {
	h := startHostile(t, newEnv(t))
	code := func(id string) any {
		t.Helper()
		res, _ := h.await(id, 30*time.Second)
		e, _ := res["error"].(map[string]any)
		if e == nil {
			t.Fatalf("answer %s: no error: %v", id, res)
		}
		return e["code"]
	}
	h.send(`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	if got := code(`"early"`); got != float64(jsonrpc.CodeInvalidRequest) {
		t.Errorf("tools/list before initialize: code %v, want %d", got, jsonrpc.CodeInvalidRequest)
	}
	h.send(initLine)
	h.await("1", 30*time.Second)
	h.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	h.send(strings.Replace(initLine, `"id":1`, `"id":"again"`, 1))
	if got := code(`"again"`); got != float64(jsonrpc.CodeInvalidRequest) {
		t.Errorf("a second initialize: code %v, want %d", got, jsonrpc.CodeInvalidRequest)
	}
	h.exit(10 * time.Second)
}

// maxLine is the longest input line the server passes on.
const maxLine = 16 << 20
