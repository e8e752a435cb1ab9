package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// teamServer is the real binary serving a team over HTTP on a loopback port.
type teamServer struct {
	url    string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan error
}

func startTeamServer(t *testing.T, e env, args ...string) *teamServer {
	t.Helper()
	s, err := launchTeamServer(t, e, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// launchTeamServer is startTeamServer without failing t, for goroutines.
func launchTeamServer(t *testing.T, e env, args ...string) (*teamServer, error) {
	cmd := e.command(append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &teamServer{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://[0-9.:]+)/mcp`)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			fmt.Fprintln(s.stderr, sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		s.exited <- cmd.Wait()
	}()
	select {
	case s.url = <-found:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start:\n%s", s.stderr)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr)
		}
	})
	return s, nil
}

// stop sends SIGTERM and requires a clean exit.
func (s *teamServer) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server still running 30s after SIGTERM\n%s", s.stderr)
	}
}

// newToken makes a token with the command line and checks it is printed
// alone on one line.
func newToken(t *testing.T, e env, args ...string) string {
	t.Helper()
	out, err := e.command(append([]string{"token", "create"}, args...)...).Output()
	if err != nil {
		t.Fatalf("token create %v: %v", args, err)
	}
	if !regexp.MustCompile(`^mem_[0-9a-f]{64}\n$`).Match(out) {
		t.Fatalf("token create printed %q", out)
	}
	return strings.TrimSpace(string(out))
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// dialTeam opens a session of the stateful revision most clients speak.
func dialTeam(ctx context.Context, s *teamServer, token string) (*mcp.ClientSession, error) {
	return dialTeamAt(ctx, s, token, "2025-11-25")
}

// dialTeamAt connects a client of that protocol revision.
func dialTeamAt(ctx context.Context, s *teamServer, token, revision string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "1"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   s.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token}},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
}

func connectTeam(t *testing.T, s *teamServer, token string) *mcp.ClientSession {
	t.Helper()
	return connectTeamAt(t, s, token, "2025-11-25")
}

func connectTeamAt(t *testing.T, s *teamServer, token, revision string) *mcp.ClientSession {
	t.Helper()
	cs, err := dialTeamAt(context.Background(), s, token, revision)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func readResource(t *testing.T, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return res.Contents[0].Text
}

func TestTeamServerEndToEnd(t *testing.T) {
	e := newEnv(t)
	testTeam(t, e, startTeamServer(t, e, "--rate", "1000"))
}

// Two servers on one SQLite file, as two replicas on one machine.
func TestTeamServerTwoReplicasSQLite(t *testing.T) {
	e := newEnv(t)
	testTeam(t, e, startTeamServer(t, e, "--rate", "1000"), startTeamServer(t, e, "--rate", "1000"))
}

// testTeam drives a team server end to end: the isolation matrix, narrowest
// wins across identities, refused tokens, concurrent writers, the log, and
// SIGTERM. Every server in servers serves the one store e names, as
// replicas do: each identity's writes go through one of them in turn, and
// every identity reads on every one of them, so that a write through one
// replica must show on all the others at once.
func testTeam(t *testing.T, e env, servers ...*teamServer) {
	ann := newToken(t, e, "--tenant", "acme", "--user", "ann", "--name", "ann's laptop")
	annCI := newToken(t, e, "--tenant", "acme", "--user", "ann", "--profile", "ci")
	bob := newToken(t, e, "--tenant", "acme", "--user", "bob")
	eve := newToken(t, e, "--tenant", "evil", "--user", "ann") // same user name, other tenant
	admin := newToken(t, e, "--tenant", "acme", "--user", "ops", "--admin")
	on := func(i int) *teamServer { return servers[i%len(servers)] }

	// Each identity has a session on every server; it writes through the
	// one of them that is its own, taking the servers in turn. The
	// sessions take the stateful and the stateless revision in turn too.
	names := []string{"ann", "annCI", "bob", "eve", "admin"}
	toks := map[string]string{"ann": ann, "annCI": annCI, "bob": bob, "eve": eve, "admin": admin}
	revisions := []string{"2025-11-25", "2026-07-28"}
	every := map[string][]*mcp.ClientSession{}
	who := map[string]*mcp.ClientSession{}
	for i, name := range names {
		for j := range servers {
			every[name] = append(every[name], connectTeamAt(t, on(i+j), toks[name], revisions[(i+j)%2]))
		}
		who[name] = every[name][0]
	}
	as, cs, bs, ops := who["ann"], who["annCI"], who["bob"], who["admin"]

	write := func(cs *mcp.ClientSession, sc, key, body string) {
		t.Helper()
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "scope": sc, "key": key, "body": body})
	}
	write(as, "project", "p-ann", "ann's own profile memory")
	write(as, "workspace", "w-ann", "every profile of ann sees this")
	write(bs, "tenant", "t-acme", "all of acme sees this")
	write(ops, "system", "s-all", "every caller sees this")
	if msg := fails(t, as, "memory_write", map[string]any{"type": "semantic", "scope": "system", "key": "s-ann", "body": "x"}); !strings.HasPrefix(msg, "invalid_argument:") {
		t.Errorf("non-admin system write: %s", msg)
	}
	if msg := fails(t, bs, "memory_delete", map[string]any{"key": "s-all"}); !strings.HasPrefix(msg, "invalid_argument:") {
		t.Errorf("non-admin system delete: %s", msg)
	}

	// The isolation matrix: who reads which key, on every server.
	visible := map[string]map[string]bool{
		"p-ann":  {"ann": true},
		"w-ann":  {"ann": true, "annCI": true},
		"t-acme": {"ann": true, "annCI": true, "bob": true, "admin": true},
		"s-all":  {"ann": true, "annCI": true, "bob": true, "admin": true, "eve": true},
	}
	for key, sees := range visible {
		for name, sessions := range every {
			for i, sess := range sessions {
				want, label := sees[name], fmt.Sprintf("%s (session %d)", name, i)
				res := call(t, sess, "memory_read", map[string]any{"key": key})
				if res.IsError == want {
					t.Errorf("%s reads %s: isError %v, want %v (%s)", label, key, res.IsError, !want, text(res))
				}
				if found(t, sess, "sees memory profile", key) != want {
					t.Errorf("%s searching finds %s: %v, want %v", label, key, !want, want)
				}
				index := readResource(t, sess, "memory://index")
				if strings.Contains(index, key) != want {
					t.Errorf("%s's index lists %s: %v, want %v", label, key, !want, want)
				}
			}
		}
	}
	// Nor by a record's address or id.
	for _, es := range every["eve"] {
		if _, err := es.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memory://tenant/semantic/t-acme"}); err == nil {
			t.Error("eve reads acme's tenant record as a resource")
		}
	}
	for _, bs := range every["bob"] {
		if !strings.Contains(readResource(t, bs, "memory://tenant/semantic/t-acme"), "all of acme") {
			t.Error("bob cannot read his tenant's record as a resource")
		}
	}
	tID := ok(t, bs, "memory_read", map[string]any{"key": "t-acme"})["record"].(map[string]any)["id"].(string)
	for _, es := range every["eve"] {
		if msg := fails(t, es, "memory_update", map[string]any{"id": tID, "body": "owned"}); !strings.HasPrefix(msg, "not_found:") {
			t.Errorf("eve updates acme's record by id: %s", msg)
		}
		if msg := fails(t, es, "memory_delete", map[string]any{"id": tID}); !strings.HasPrefix(msg, "not_found:") {
			t.Errorf("eve deletes acme's record by id: %s", msg)
		}
		if list := ok(t, es, "memory_list", nil)["records"].([]any); len(list) != 1 {
			t.Errorf("eve lists %d records, want only the system one: %v", len(list), list)
		}
	}

	// Narrowest wins across identities.
	write(ops, "system", "runner", "use go test")
	write(bs, "tenant", "runner", "use make test")
	write(cs, "project", "runner", "use the ci script")
	for name, want := range map[string]string{"eve": "use go test", "bob": "use make test", "ann": "use make test", "annCI": "use the ci script"} {
		for _, sess := range every[name] {
			if got := bodyOf(t, sess, "runner"); got != want {
				t.Errorf("%s reads runner %q, want %q", name, got, want)
			}
		}
	}
	for _, as := range every["ann"] {
		recall := ok(t, as, "memory_read", nil)["block"].(string)
		if !strings.Contains(recall, "use make test") || strings.Contains(recall, "use go test") || strings.Contains(recall, "ci script") {
			t.Errorf("ann's recall:\n%s", recall)
		}
	}
	for _, es := range every["eve"] {
		prompt, err := es.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "recall"})
		if err != nil {
			t.Fatal(err)
		}
		if p := prompt.Messages[0].Content.(*mcp.TextContent).Text; !strings.Contains(p, "use go test") || strings.Contains(p, "acme") {
			t.Errorf("eve's recall prompt:\n%s", p)
		}
	}
	// A new session's instructions index only what its identity sees.
	for i := range servers {
		es2 := connectTeam(t, on(i), eve)
		if ins := es2.InitializeResult().Instructions; strings.Contains(ins, "t-acme") || strings.Contains(ins, "p-ann") {
			t.Errorf("eve's instructions show acme's memory:\n%s", ins)
		}
	}

	if len(servers) > 1 {
		testReplicas(t, every["bob"])
		// A new session's instructions on one replica index what was
		// just written through another.
		for i := range servers {
			key := fmt.Sprintf("fresh-index-%d", i)
			write(every["bob"][i], "tenant", key, "indexed for new sessions everywhere")
			if ins := connectTeam(t, on(i+1), ann).InitializeResult().Instructions; !strings.Contains(ins, key) {
				t.Errorf("a new session's instructions on another replica lack %s:\n%s", key, ins)
			}
		}
		// A session is its replica's: another answers 404 for it, and the
		// client starts a new one there.
		req, _ := http.NewRequest("POST", on(1).url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+ann)
		req.Header.Set("Mcp-Session-Id", as.ID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("a session on another replica: %d, want 404", resp.StatusCode)
		}
	}

	// Missing, wrong and revoked tokens: 401, one body for all.
	post := func(s *teamServer, token string) (int, string, string) {
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
	}
	if out, err := e.command("token", "revoke", annCI).Output(); err != nil || !strings.HasPrefix(string(out), "revoked tok_") {
		t.Fatalf("revoke: %q %v", out, err)
	}
	wrong := "mem_" + strings.Repeat("0", 64)
	var bodies []string
	for _, s := range servers {
		for _, h := range []string{"", "Basic " + ann, "Bearer", "Bearer " + wrong, "Bearer " + ann[:20], "Bearer " + annCI} {
			code, www, body := post(s, h)
			if code != http.StatusUnauthorized || !strings.HasPrefix(www, "Bearer") {
				t.Errorf("Authorization %.12q: %d, WWW-Authenticate %q", h, code, www)
			}
			bodies = append(bodies, body)
		}
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("401 bodies differ: %q and %q", bodies[0], b)
		}
	}
	// The revoked token's open sessions, on every server, are refused on
	// their next request.
	for _, cs := range every["annCI"] {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_list", Arguments: map[string]any{}}); err == nil {
			t.Error("a revoked token's session still answers")
		}
	}
	// A session belongs to the token that opened it: another token
	// cannot ride on its id.
	req, _ := http.NewRequest("POST", on(0).url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"memory_read","arguments":{"key":"p-ann"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Header.Set("Mcp-Session-Id", as.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), "ann's own") {
		t.Errorf("bob on ann's session: %d %s", resp.StatusCode, b)
	}

	// Many sessions at once, spread over the servers: every write
	// acknowledged, and readable on every server.
	const sessions, writes = 8, 40
	loadToks := make([]string, sessions)
	for i := range loadToks {
		loadToks[i] = newToken(t, e, "--tenant", "load", "--user", fmt.Sprint("u", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*writes)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := dialTeam(context.Background(), on(i), loadToks[i])
			if err != nil {
				errs <- err
				return
			}
			defer sess.Close()
			for j := range writes {
				res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_write", Arguments: map[string]any{
					"type": "semantic", "scope": "tenant", "key": fmt.Sprintf("k-%d-%d", i, j), "body": fmt.Sprintf("write %d of session %d", j, i),
				}})
				if err != nil {
					errs <- err
				} else if res.IsError {
					errs <- fmt.Errorf("session %d write %d: %s", i, j, text(res))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, s := range servers {
		reader := connectTeam(t, s, loadToks[i])
		got := ok(t, reader, "memory_list", map[string]any{"limit": 500})["records"].([]any)
		keys := map[string]bool{}
		for _, r := range got {
			keys[r.(map[string]any)["key"].(string)] = true
		}
		if len(got) != sessions*writes+2 { // and the two system records
			t.Errorf("server %d: the tenant's records and the system ones: %d, want %d", i, len(got), sessions*writes+2)
		}
		for i := range sessions {
			for j := range writes {
				if !keys[fmt.Sprintf("k-%d-%d", i, j)] {
					t.Errorf("k-%d-%d missing", i, j)
				}
			}
		}
		hits := ok(t, reader, "memory_search", map[string]any{"query": "write 39 of session 7", "limit": 3})["results"].([]any)
		if len(hits) == 0 || hits[0].(map[string]any)["key"] != "k-7-39" {
			t.Errorf("server %d: searching for the last write of the last session finds %v", i, hits)
		}
	}
	var logs strings.Builder
	for _, s := range servers {
		logs.WriteString(s.stderr.String())
	}
	log := logs.String()
	if strings.Contains(log, "SQLITE_BUSY") || strings.Contains(log, "database is locked") || strings.Contains(log, "deadlock") {
		t.Errorf("the log shows lock contention:\n%s", log)
	}

	// Every request is logged with its token's id and tool; never a token
	// or what was written.
	for _, tok := range []string{ann, annCI, bob, eve, admin, wrong} {
		if strings.Contains(log, tok) || strings.Contains(log, tok[4:24]) {
			t.Error("a token is in the log")
		}
	}
	if strings.Contains(log, "every caller sees this") || strings.Contains(log, "write 3 of session") {
		t.Error("written content is in the log")
	}
	if !regexp.MustCompile(`msg=request token=tok_[0-9a-f]+ http=POST method=tools/call tool=memory_write status=200`).MatchString(log) {
		t.Errorf("no request line with token and tool in the log:\n%.2000s", log)
	}
	if !regexp.MustCompile(`msg=call token=tok_[0-9a-f]+ method=tools/call tool=memory_write outcome=invalid_argument`).MatchString(log) {
		t.Errorf("no call line with the refused write's outcome in the log")
	}

	// SIGTERM with sessions still open: a clean exit.
	for _, s := range servers {
		s.stop(t)
	}
}

// testReplicas checks that what one identity writes, updates and deletes
// through one replica is what its sessions on every other replica read,
// search, list and index the moment the write is acknowledged.
func testReplicas(t *testing.T, sessions []*mcp.ClientSession) {
	t.Helper()
	words := []string{"albatross", "bison", "cormorant", "dugong", "echidna", "flamingo", "gazelle", "hornbill", "ibex", "jacana", "kinkajou", "lemur"}
	for i, word := range words {
		w, r := sessions[i%len(sessions)], sessions[(i+1)%len(sessions)]
		key := "fresh-" + word
		ok(t, w, "memory_write", map[string]any{"type": "semantic", "scope": "tenant", "key": key, "body": "the " + word + " was seen first", "tags": []string{"zoo"}})
		if got := bodyOf(t, r, key); got != "the "+word+" was seen first" {
			t.Errorf("%s written on one replica reads %q on the other", key, got)
		}
		if !found(t, r, word, key) {
			t.Errorf("%s written on one replica: a search on the other does not find it", key)
		}
		if !strings.Contains(readResource(t, r, "memory://index"), key) {
			t.Errorf("%s written on one replica: the other's index lacks it", key)
		}
		// Updated on the reader's replica, read back on the writer's.
		ok(t, r, "memory_update", map[string]any{"key": key, "type": "semantic", "scope": "tenant", "body": "the " + word + " moved on"})
		if got := bodyOf(t, w, key); got != "the "+word+" moved on" {
			t.Errorf("%s updated on one replica reads %q on the other", key, got)
		}
		if found(t, w, "seen first "+word, key) && !found(t, w, "moved "+word, key) {
			t.Errorf("%s updated on one replica: the other searches the old body", key)
		}
		if i%2 == 0 {
			ok(t, w, "memory_delete", map[string]any{"key": key, "type": "semantic", "scope": "tenant"})
			if res := call(t, r, "memory_read", map[string]any{"key": key}); !res.IsError {
				t.Errorf("%s deleted on one replica still reads on the other: %s", key, text(res))
			}
			if found(t, r, word, key) {
				t.Errorf("%s deleted on one replica is still found on the other", key)
			}
		}
	}
	for _, s := range sessions {
		if n := len(ok(t, s, "memory_list", map[string]any{"tag": "zoo"})["records"].([]any)); n != len(words)/2 {
			t.Errorf("a replica lists %d records tagged zoo, want %d", n, len(words)/2)
		}
	}
	// A session captured through one replica, confirmed through another:
	// the statement confirmed in two sessions becomes a fact everywhere.
	for i, s := range sessions {
		ok(t, s, "memory_capture", map[string]any{"session_id": fmt.Sprint("replica-session-", i), "outcome": "done",
			"statements": []string{"the staging cluster runs in eu-west"}})
	}
	for _, s := range sessions {
		eps := ok(t, s, "memory_list", map[string]any{"type": "episodic"})["records"].([]any)
		if len(eps) < len(sessions) {
			t.Errorf("a replica lists %d episodes, want %d", len(eps), len(sessions))
		}
		if len(ok(t, s, "memory_search", map[string]any{"query": "staging cluster eu-west", "type": "semantic"})["results"].([]any)) == 0 {
			t.Error("the statement confirmed through two replicas is not a fact on this one")
		}
	}
}

// found reports whether searching for query finds key.
func found(t *testing.T, cs *mcp.ClientSession, query, key string) bool {
	t.Helper()
	for _, h := range ok(t, cs, "memory_search", map[string]any{"query": query})["results"].([]any) {
		if h.(map[string]any)["key"] == key {
			return true
		}
	}
	return false
}

func TestTeamServerLimits(t *testing.T) {
	e := newEnv(t)
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	s := startTeamServer(t, e, "--rate", "1", "--timeout", "1s")

	if resp, err := http.Get(s.url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	post := func(body io.Reader) *http.Response {
		req, _ := http.NewRequest("POST", s.url+"/mcp", body)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// Over the body cap: 413.
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_write","arguments":{"body":"` + strings.Repeat("x", 2<<20) + `"}}}`
	if resp := post(strings.NewReader(big)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("2 MiB body: %d", resp.StatusCode)
	}
	// A burst of 5 then 429 with Retry-After (the 413 took one).
	var limited *http.Response
	for i := 0; i < 10 && limited == nil; i++ {
		if resp := post(strings.NewReader(`{}`)); resp.StatusCode == http.StatusTooManyRequests {
			limited = resp
		}
	}
	if limited == nil {
		t.Fatal("no 429 after 10 requests at a rate of 1/s")
	}
	if n, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q", limited.Header.Get("Retry-After"))
	}
	// A client that never finishes its header is cut off.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\n")
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Errorf("slow client still connected: %v", err)
	}
	// So is one that sends its header and then dawdles over the body.
	time.Sleep(5 * time.Second) // the limiter refills
	conn2, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprintf(conn2, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", tok)
	conn2.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn2), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("slow body: %v %v", resp, err)
	}
	s.stop(t)
}

func TestTokenCommand(t *testing.T) {
	testTokenCommand(t, newEnv(t))
}

// testTokenCommand creates, lists and revokes tokens with the command line
// in the store e names.
func testTokenCommand(t *testing.T, e env) {
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann", "--profile", "ci", "--name", "ci runner")
	out, err := e.command("token", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), tok) || strings.Contains(string(out), tok[4:20]) {
		t.Error("token list shows the token")
	}
	for _, want := range []string{"ID", "LAST USED", "ci runner", "acme", "ann", "ci", "never"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("token list lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{{"--user", "ann"}, {"--tenant", "acme"}, {"--tenant", "a b", "--user", "x"}} {
		cmd := e.command(append([]string{"token", "create"}, bad...)...)
		if out, err := cmd.Output(); err == nil || len(out) > 0 {
			t.Errorf("token create %v: %q %v", bad, out, err)
		}
	}
	if err := e.command("token", "revoke", "tok_nosuch").Run(); err == nil {
		t.Error("revoking an unknown token succeeded")
	}
	if out, err := e.command("token", "revoke", tok).Output(); err != nil || !strings.Contains(string(out), "revoked") {
		t.Errorf("revoke by value: %q %v", out, err)
	}
	out, _ = e.command("token", "list", "--json").Output()
	if strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("after revoking: %s", out)
	}
	if err := e.command("serve", "--http").Run(); err == nil {
		t.Error("serve --http without an address succeeded")
	}
	if err := e.command("serve", "--http", "127.0.0.1:0", "--tls-cert", "x.pem").Run(); err == nil {
		t.Error("serve with a certificate and no key succeeded")
	}
}

func TestTeamServerTLS(t *testing.T) {
	e := newEnv(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "memory-mcp test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)

	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	cmd := e.command("serve", "--http", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(pipe)
	url := ""
	for url == "" && sc.Scan() {
		if m := regexp.MustCompile(`url=(https://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	go io.Copy(io.Discard, pipe)
	if url == "" {
		t.Fatal("no https url in the log")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-tls", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: tlsBearer{tr, tok}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "over-tls", "body": "written over https"})
	if got := bodyOf(t, cs, "over-tls"); got != "written over https" {
		t.Errorf("read %q", got)
	}
	cs.Close()
	// Plain HTTP to the TLS port gets nothing useful.
	if resp, err := http.Get(strings.Replace(url, "https://", "http://", 1)); err == nil && resp.StatusCode == http.StatusOK {
		t.Error("plain HTTP answered 200 on the TLS port")
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
}

type tlsBearer struct {
	tr    http.RoundTripper
	token string
}

func (b tlsBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.tr.RoundTrip(r)
}
