package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRequestBeforeInitializeOverHTTP: a pre-2026-07-28 client that sends
// a request before it has a session gets a JSON-RPC error with a real code
// (Invalid Request), not code 0, and HTTP 400 as the transport asks for a
// request without Mcp-Session-Id. initialize itself still opens a session.
func TestRequestBeforeInitializeOverHTTP(t *testing.T) {
	e := newEnv(t)
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	s := startTeamServer(t, e)
	post := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, method := range []string{"tools/list", "tools/call", "resources/read"} {
		code, body := post(`{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{}}`)
		var msg struct {
			ID    int `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		text := body
		if i := strings.Index(text, "data: "); i >= 0 {
			text = strings.TrimSpace(text[i+len("data: "):])
		}
		if err := json.Unmarshal([]byte(text), &msg); err != nil || msg.Error == nil {
			t.Fatalf("%s before initialize: %d %q: want a JSON-RPC error", method, code, body)
		}
		if code != http.StatusBadRequest || msg.Error.Code != -32600 || msg.ID != 7 || !strings.Contains(msg.Error.Message, "initialize") {
			t.Errorf("%s before initialize: HTTP %d, %+v; want 400, code -32600 naming initialize, id 7", method, code, *msg.Error)
		}
	}
	// A request naming its revision in _meta is not refused for want of a
	// session: it stands alone.
	if code, body := post(`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`); code == http.StatusBadRequest && strings.Contains(body, "no session") {
		t.Errorf("a request with the revision in _meta was refused for want of a session: %d %q", code, body)
	}
	// The handshake still works.
	if code, body := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); code != http.StatusOK || !strings.Contains(body, `"protocolVersion"`) {
		t.Errorf("initialize: %d %q", code, body)
	}
	cs := connectTeam(t, s, tok)
	ok(t, cs, "memory_list", map[string]any{})
}
