package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// roundRobin is a load balancer in front of several replicas that keeps
// nothing: each request goes to the next replica, with the token added.
type roundRobin struct {
	token    string
	replicas []*teamServer

	mu    sync.Mutex
	next  int
	count []int // requests sent to each replica
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	rr.mu.Lock()
	i := rr.next % len(rr.replicas)
	rr.next++
	rr.count[i]++
	rr.mu.Unlock()
	u, _ := url.Parse(rr.replicas[i].url)
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = u.Host, u.Host
	r.Header.Set("Authorization", "Bearer "+rr.token)
	return http.DefaultTransport.RoundTrip(r)
}

// A 2026-07-28 client needs no session: behind a balancer that sends each
// request to another replica, every call works, and what one replica
// wrote the other reads. A 2025-11-25 client on the same servers still
// gets the stateful handshake and a session.
func TestTeamServerStatelessAcrossReplicas(t *testing.T) {
	e := newEnv(t)
	servers := []*teamServer{startTeamServer(t, e, "--rate", "1000"), startTeamServer(t, e, "--rate", "1000")}
	ann := newToken(t, e, "--tenant", "acme", "--user", "ann")
	rr := &roundRobin{token: ann, replicas: servers, count: make([]int, len(servers))}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-stateless", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: servers[0].url + "/mcp", HTTPClient: &http.Client{Transport: rr}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	if cs.ID() != "" {
		t.Errorf("a 2026-07-28 client got session %q", cs.ID())
	}
	for i := range 6 {
		key := fmt.Sprintf("runner-%d", i)
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "scope": "project", "key": key, "body": "use go test " + key})
		if got := bodyOf(t, cs, key); got != "use go test "+key {
			t.Errorf("%s reads %q on the other replica", key, got)
		}
	}
	if !strings.Contains(readResource(t, cs, "memory://index"), "runner-5") {
		t.Error("the index lacks what was written")
	}
	rr.mu.Lock()
	if rr.count[0] == 0 || rr.count[1] == 0 {
		t.Errorf("requests per replica: %v", rr.count)
	}
	rr.mu.Unlock()

	old := connectTeam(t, servers[1], ann)
	if v := old.InitializeResult().ProtocolVersion; v != "2025-11-25" || old.ID() == "" {
		t.Errorf("a 2025-11-25 client: version %s, session %q", v, old.ID())
	}
	if got := bodyOf(t, old, "runner-3"); got != "use go test runner-3" {
		t.Errorf("the 2025-11-25 client reads %q", got)
	}

	testCaching(t, cs)
	testCompletion(t, cs)
	testCompletion(t, old)

	// A missing resource: invalid params, naming the URI.
	for _, s := range []*mcp.ClientSession{cs, old} {
		_, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://project/semantic/nope"})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(je.Data), `"memory://project/semantic/nope"`) {
			t.Errorf("a missing resource: %v (%#v)", err, je)
		}
	}

	// Methods the revision removed are not found, over HTTP 404.
	for _, method := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"} {
		status, body := post2026(t, servers[0], ann, method, map[string]any{"uri": "memory://index", "level": "info"})
		if status != http.StatusNotFound || !strings.Contains(body, "-32601") {
			t.Errorf("2026-07-28 %s: %d %s, want 404 and -32601", method, status, body)
		}
	}
}

// post2026 sends one 2026-07-28 request as a client of that revision would,
// and returns the status and the body.
func post2026(t *testing.T, s *teamServer, token, method string, params map[string]any) (int, string) {
	t.Helper()
	p := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}}
	for k, v := range params {
		p[k] = v
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": p})
	req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// testCaching checks the caching hints: what is the same for every caller
// may be cached by anyone, what the token decides only by its client.
func testCaching(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]mcp.Cacheable{"tools/list": tools.Cacheable, "prompts/list": prompts.Cacheable,
		"resources/list": resources.Cacheable, "resources/templates/list": templates.Cacheable} {
		if c.CacheScope != "public" || c.TTLMs <= 0 {
			t.Errorf("%s: %+v, want public with a ttl", name, c)
		}
	}
	for _, uri := range []string{"memory://index", "memory://recall", "memory://project/semantic/runner-1"} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		if res.CacheScope != "private" {
			t.Errorf("%s: %+v, want private", uri, res.Cacheable)
		}
	}
}

// testCompletion checks the completions of the record template's and the
// recall prompt's arguments.
func testCompletion(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	complete := func(ref *mcp.CompleteReference, name, value string, args map[string]string) []string {
		t.Helper()
		p := &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: name, Value: value}}
		if args != nil {
			p.Context = &mcp.CompleteContext{Arguments: args}
		}
		res, err := cs.Complete(context.Background(), p)
		if err != nil {
			t.Fatalf("complete %s=%q: %v", name, value, err)
		}
		return res.Completion.Values
	}
	record := &mcp.CompleteReference{Type: "ref/resource", URI: "memory://{scope}/{type}/{key}"}
	if got := complete(record, "scope", "w", nil); !slices.Equal(got, []string{"workspace"}) {
		t.Errorf("scope w: %v", got)
	}
	if got := complete(record, "type", "", nil); !slices.Equal(got, []string{"working", "episodic", "semantic", "procedural"}) {
		t.Errorf("type: %v", got)
	}
	if got := complete(record, "key", "runner-", map[string]string{"scope": "project", "type": "semantic"}); len(got) != 6 || got[0] != "runner-0" {
		t.Errorf("key runner-: %v", got)
	}
	if got := complete(record, "key", "runner-", map[string]string{"scope": "tenant"}); len(got) != 0 {
		t.Errorf("key runner- at the tenant scope: %v", got)
	}
	recall := &mcp.CompleteReference{Type: "ref/prompt", Name: "recall"}
	if got := complete(recall, "query", "runner-4", nil); !slices.Equal(got, []string{"runner-4"}) {
		t.Errorf("recall query: %v", got)
	}
	if got := complete(recall, "max_tokens", "", nil); len(got) == 0 {
		t.Error("recall max_tokens: no values")
	}
	// Something else: nothing to offer, and no error.
	if got := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "other"}, "x", "", nil); len(got) != 0 {
		t.Errorf("another prompt: %v", got)
	}
}

// A browser's page from another origin is refused before anything else,
// token or not, as is a request naming a host the server does not answer
// to (DNS rebinding); the loopback names and the --allowed-host ones pass.
func TestTeamServerHostAndOrigin(t *testing.T) {
	e := newEnv(t)
	e.extra = append(e.extra, "PROMETHEUS_MEMORY_ALLOWED_HOSTS=proxy.internal")
	s := startTeamServer(t, e, "--rate", "1000", "--allowed-host", "memory.example.com")
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		host, origin, token string
		want                int
	}{
		{"", "", tok, 200},
		{"", "http://localhost:6274", tok, 200},
		{"localhost:9999", "", tok, 200},
		{"memory.example.com", "https://memory.example.com", tok, 200},
		{"proxy.internal:8080", "", tok, 200},
		{"", "https://evil.example.com", tok, 403},
		{"", "https://evil.example.com", "", 403},
		{"", "null", tok, 403},
		{"evil.example.com", "", tok, 403},
		{"evil.example.com", "", "", 403},
		{"memory.example.com", "https://evil.example.com", tok, 403},
		{"", "", "", 401},
	} {
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %q, Origin %q, token %v: %d, want %d", c.host, c.origin, c.token != "", resp.StatusCode, c.want)
		}
	}
}
