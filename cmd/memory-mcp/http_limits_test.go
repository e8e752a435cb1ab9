package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// post sends body to the team server's /mcp with the given Authorization
// header and returns the status.
func postMCP(t *testing.T, s *teamServer, auth string, body io.Reader) int {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/mcp", body)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%.80s: %v", auth, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// ghToken is shaped like a GitHub token; it is not one.
const ghToken = "ghp_Zk3q9XbT1mW7pL2vR8nY4cH6dJ0sF5gA1eQx"

// TestTeamServerLogHygiene sends what a careless or hostile client might:
// secrets and megabytes where names belong. The log keeps neither.
func TestTeamServerLogHygiene(t *testing.T) {
	e := newEnv(t)
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	other := newToken(t, e, "--tenant", "acme", "--user", "bob")
	s := startTeamServer(t, e, "--rate", "1000")
	cs := connectTeam(t, s, tok)
	ok(t, cs, "memory_list", nil)

	huge := strings.Repeat("n", 200<<10)
	for _, name := range []string{other, ghToken, huge} {
		for _, body := range []string{
			fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, name),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":{}}`, name),
		} {
			postMCP(t, s, "Bearer "+tok, strings.NewReader(body))
		}
		// Through the session too, where the calls are logged again.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err != nil {
			t.Logf("call %.12s… (%d bytes): %v", name, len(name), err)
		}
		cancel()
	}
	// Requests in the open session, which the SDK itself may log.
	for _, body := range []string{
		fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":{}}`, other),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":%q,"arguments":{"body":%q}}}`, other, other),
		fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, other),
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":` + other + `}`,
	} {
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		if resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	// A secret where the token belongs, and a token in the query string.
	postMCP(t, s, "Bearer "+ghToken, strings.NewReader(`{}`))
	req, _ := http.NewRequest("GET", s.url+"/mcp?token="+other, nil)
	if resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req); err == nil {
		resp.Body.Close()
	}
	ok(t, cs, "memory_list", nil)
	s.stop(t)

	log := s.stderr.String()
	for _, secret := range []string{tok[4:24], other[4:24], ghToken[4:20]} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds a secret's text %q", secret)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if len(sc.Text()) > 1000 {
			t.Errorf("a log line of %d bytes: %.200s…", len(sc.Text()), sc.Text())
		}
	}
}

// TestTeamServerSlowAndLargeClients: chunked bodies past the cap, a body
// trickled in under every per-read timeout but over the total, and a crowd
// of half-open connections; all are cut off while a real client is served.
func TestTeamServerSlowAndLargeClients(t *testing.T) {
	e := newEnv(t)
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	s := startTeamServer(t, e, "--rate", "1000", "--timeout", "1s")
	addr := strings.TrimPrefix(s.url, "http://")

	// A chunked body of unknown length past the cap: 413, nothing stored.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_write","arguments":{"type":"semantic","key":"big","body":"`))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 40 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	if code := postMCP(t, s, "Bearer "+tok, pr); code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked 2.5 MiB body: %d", code)
	}
	pr.Close()

	// Fifty connections that never finish their header.
	var conns []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\n")
		conns = append(conns, c)
	}
	// A real client is served meanwhile.
	cs := connectTeam(t, s, tok)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "still-served", "body": "yes"})
	var wg sync.WaitGroup
	cut := make(chan bool, len(conns))
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := io.ReadAll(c)
			cut <- err == nil // closed by the server, not by our deadline
		}()
	}
	wg.Wait()
	close(cut)
	for ok := range cut {
		if !ok {
			t.Error("a half-open connection was still held after 20s")
			break
		}
	}

	// A body trickled a byte at a time, each well inside the timeout, is
	// cut off when the whole body takes longer than the timeout.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n", tok)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	close(stop)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("trickled body: %v %v", resp, err)
	}
	ok(t, cs, "memory_read", map[string]any{"key": "still-served"})
	s.stop(t)
}

// TestTeamServerSessionCap: one token opening sessions without end is
// refused past the cap; other tokens are not.
func TestTeamServerSessionCap(t *testing.T) {
	e := newEnv(t)
	greedy := newToken(t, e, "--tenant", "acme", "--user", "ann")
	polite := newToken(t, e, "--tenant", "acme", "--user", "bob")
	s := startTeamServer(t, e, "--rate", "100000")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	refused := 0
	for range maxSessions + 10 {
		if code := postMCP(t, s, "Bearer "+greedy, strings.NewReader(initialize)); code == http.StatusTooManyRequests {
			refused++
		} else if code != http.StatusOK {
			t.Fatalf("initialize: %d", code)
		}
	}
	if refused != 10 {
		t.Errorf("%d sessions refused, want the 10 past %d", refused, maxSessions)
	}
	// Another token is unaffected.
	ok(t, connectTeam(t, s, polite), "memory_list", nil)
	s.stop(t)
}

// TestTeamServerRevokedMidSession: a token revoked while its session is
// open is refused on its next request, and the server soon ends the
// session it holds for it, event stream and all.
func TestTeamServerRevokedMidSession(t *testing.T) {
	e := newEnv(t)
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	keep := newToken(t, e, "--tenant", "acme", "--user", "bob")
	s := startTeamServer(t, e, "--rate", "1000")
	cs := connectTeam(t, s, tok)
	other := connectTeam(t, s, keep)
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "before", "body": "written before the revoke"})
	if out, err := e.command("token", "revoke", tok).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v %s", err, out)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "memory_list", Arguments: map[string]any{}}); err == nil {
		t.Error("the revoked token's session still answers")
	}
	// The server ends the session it still holds for the token.
	re := regexp.MustCompile(`msg="token revoked: its sessions ended" token=tok_[0-9a-f]+ sessions=1`)
	for deadline := time.Now().Add(4 * revokedEvery); !re.MatchString(s.stderr.String()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the revoked token's session still open after %v", 4*revokedEvery)
		}
	}
	// Other tokens go on.
	ok(t, other, "memory_list", nil)
	s.stop(t)
}

// The team server's limits, as internal/server sets them.
const (
	maxSessions  = 256             // open sessions per token
	revokedEvery = 5 * time.Second // how often revoked tokens' sessions are ended
)
