package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory/storetest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/dburl"
)

// testPassword is put in every PostgreSQL URL the tests give the binary:
// the test cluster trusts loopback and never asks for it, so it is free to
// look for in everything the binary says.
const testPassword = "pw-Zq81xK3"

// pgEnv is a machine whose store is a fresh PostgreSQL database, named by
// PROMETHEUS_MEMORY_DB_URL (with a password in it). It returns the URL too.
func pgEnv(t *testing.T) (env, string) {
	t.Helper()
	u, err := url.Parse(storetest.NewPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), testPassword)
	e := newEnv(t)
	e.extra = append(e.extra[:len(e.extra):len(e.extra)], "PROMETHEUS_MEMORY_DB_URL="+u.String())
	t.Cleanup(func() {
		// PostgreSQL was the store: nothing went to the file.
		if _, err := os.Stat(e.db); !os.IsNotExist(err) {
			t.Errorf("the SQLite file %s exists with the store on PostgreSQL (%v)", e.db, err)
		}
	})
	return e, u.String()
}

// noPassword fails t if what the binary said holds the password.
func noPassword(t *testing.T, what, said string) {
	t.Helper()
	if strings.Contains(said, testPassword) {
		t.Errorf("%s shows the database password:\n%s", what, said)
	}
}

// Two replicas on one PostgreSQL database, each serving half the sessions.
func TestTeamServerTwoReplicasPostgres(t *testing.T) {
	e, _ := pgEnv(t)
	a := startTeamServer(t, e, "--rate", "1000")
	b := startTeamServer(t, e, "--rate", "1000")
	testTeam(t, e, a, b)
	noPassword(t, "the log", a.stderr.String()+b.stderr.String())
}

func TestTokenCommandPostgres(t *testing.T) {
	e, _ := pgEnv(t)
	testTokenCommand(t, e)
}

// proxy is a TCP proxy on loopback between the server and PostgreSQL, that
// a test cuts and restores: a real network failure.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	down    bool
	stalled bool // bytes are held, not passed on: a partition, not a refusal
	conns   map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.drop()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			abort(c)
			continue
		}
		// Looked at with the connections registered, so that a cut in
		// between cannot miss them.
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			abort(c)
			abort(s)
			continue
		}
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.isStalled() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// abort closes c with a reset, as a peer that went away does.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// drop resets every connection through the proxy.
func (p *proxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		abort(c)
		delete(p.conns, c)
	}
}

// cut makes the database unreachable: every connection is reset, and new
// ones are refused, until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.drop()
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down, p.stalled = false, false
	p.mu.Unlock()
}

// stall holds every byte either way until restore: the database is up but
// says nothing, as behind a network partition.
func (p *proxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

func (p *proxy) isStalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// health is GET /healthz: its status and body.
func health(t *testing.T, s *teamServer) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(s.url + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// awaitHealth polls /healthz until it answers code, and returns its body.
func awaitHealth(t *testing.T, s *teamServer, code int, within time.Duration) string {
	t.Helper()
	var got int
	var body string
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got, body = health(t, s); got == code {
			return body
		}
	}
	t.Fatalf("/healthz still answers %d %q after %v, want %d\n%s", got, body, within, code, s.stderr)
	return ""
}

// The database goes away behind a running team server and comes back:
// /healthz fails while it is away and recovers, connections reset under the
// server are retried, and every write acknowledged before, during and after
// is in the database.
func TestTeamServerDatabaseOutage(t *testing.T) {
	direct := storetest.NewPostgres(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, u.Host)
	u.Host = px.addr()
	u.User = url.UserPassword(u.User.Username(), testPassword)
	e := newEnv(t)
	e.extra = append(e.extra, "PROMETHEUS_MEMORY_DB_URL="+u.String())
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	s := startTeamServer(t, e, "--rate", "1000")
	sess := connectTeam(t, s, tok)

	acked := map[string]string{}
	var mu sync.Mutex
	write := func(sess *mcp.ClientSession, key string) error {
		body := "written as " + key
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "memory_write", Arguments: map[string]any{"type": "semantic", "scope": "tenant", "key": key, "body": body}})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New(text(res))
		}
		mu.Lock()
		acked[key] = body
		mu.Unlock()
		return nil
	}
	if code, body := health(t, s); code != http.StatusOK {
		t.Fatalf("healthz before: %d %s", code, body)
	}
	for i := range 10 {
		if err := write(sess, fmt.Sprint("before-", i)); err != nil {
			t.Fatalf("write before the outage: %v", err)
		}
	}

	// A blip: every connection to the database reset at once. The store
	// reconnects and retries; no write is refused for it.
	for round := range 3 {
		px.drop()
		for i := range 5 {
			if err := write(sess, fmt.Sprintf("blip-%d-%d", round, i)); err != nil {
				t.Errorf("write after connections were reset: %v", err)
			}
		}
	}

	// Connections reset under writes in flight, from several sessions at
	// once: a write is refused only when its commit's fate is unknown, and
	// one acknowledged is kept.
	stop := make(chan struct{})
	var writers sync.WaitGroup
	var refused atomic.Int64
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			sess, err := dialTeam(context.Background(), s, tok)
			if err != nil {
				t.Error(err)
				return
			}
			defer sess.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := write(sess, fmt.Sprintf("inflight-%d-%d", w, i)); err != nil {
					// Only a commit whose fate is unknown may fail: all
					// else is retried on a new connection.
					refused.Add(1)
					if !strings.Contains(err.Error(), "may or may not have been saved") {
						t.Errorf("a write refused for a reset connection: %v", err)
					}
				}
			}
		}()
	}
	for range 5 {
		time.Sleep(150 * time.Millisecond)
		px.drop()
	}
	close(stop)
	writers.Wait()
	t.Logf("writes refused while connections were reset under them: %d", refused.Load())

	// An outage: the database unreachable for a while.
	px.cut()
	body := awaitHealth(t, s, http.StatusServiceUnavailable, 30*time.Second)
	if len(body) > 64 || strings.Contains(body, px.addr()) || strings.Contains(body, "postgres") {
		t.Errorf("/healthz says too much while the database is away: %q", body)
	}
	noPassword(t, "/healthz", body)
	// Writes sent while it is away are either refused or, once it is back,
	// acknowledged and kept: never acknowledged and lost.
	var wg sync.WaitGroup
	outcomes := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes <- write(sess, fmt.Sprint("during-", i))
		}()
	}
	time.Sleep(2 * time.Second)
	if code, _ := health(t, s); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz answers %d with the database still away", code)
	}
	px.restore()
	awaitHealth(t, s, http.StatusOK, 60*time.Second)
	wg.Wait()
	close(outcomes)
	for err := range outcomes {
		if err != nil {
			t.Logf("a write sent during the outage was refused: %v", err)
		}
	}
	// A longer outage: past the store's patience, a request is answered
	// 503 with Retry-After, and nothing reaches a tool.
	px.cut()
	awaitHealth(t, s, http.StatusServiceUnavailable, 30*time.Second)
	req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a request while the database is away: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	noPassword(t, "a 503", string(b))
	px.restore()
	awaitHealth(t, s, http.StatusOK, 60*time.Second)

	// A partition: the database says nothing at all. /healthz does not
	// hang with it, and recovers when it speaks again.
	px.stall()
	awaitHealth(t, s, http.StatusServiceUnavailable, 30*time.Second)
	px.restore()
	awaitHealth(t, s, http.StatusOK, 60*time.Second)

	// The same session goes on once the database is back.
	for i := range 10 {
		if err := write(sess, fmt.Sprint("after-", i)); err != nil {
			t.Errorf("write after the outage: %v", err)
		}
	}

	// Every acknowledged write is in the database: read through a fresh
	// session of this server, and through a second server that reaches
	// the database directly.
	d := e
	d.extra = []string{"PROMETHEUS_MEMORY_DB_URL=" + direct}
	other := startTeamServer(t, d, "--rate", "1000")
	for _, reader := range []*mcp.ClientSession{connectTeam(t, s, tok), connectTeam(t, other, tok)} {
		list := ok(t, reader, "memory_list", map[string]any{"limit": 500})["records"].([]any)
		if len(list) < len(acked) {
			t.Errorf("%d records listed, %d writes acknowledged", len(list), len(acked))
		}
		for key, want := range acked {
			if got := bodyOf(t, reader, key); got != want {
				t.Errorf("%s reads %q, want %q", key, got, want)
			}
		}
	}
	if len(acked) < 10+15+10 {
		t.Errorf("only %d writes acknowledged", len(acked))
	}
	noPassword(t, "the log", s.stderr.String())
	s.stop(t)
	other.stop(t)
}

// The command line on PostgreSQL: the scripts of testdata/script/postgres,
// and those of testdata/script that hold for any store, each on a database
// of its own.
func TestScriptsPostgres(t *testing.T) {
	storetest.PostgresServer(t)
	p := scriptParams()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "script", "postgres", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, name := range []string{"records", "import_refused", "server_memory", "projects"} {
		files = append(files, filepath.Join("..", "..", "testdata", "script", name+".txtar"))
	}
	p.Files = files
	setup := p.Setup
	var mu sync.Mutex
	p.Setup = func(e *testscript.Env) error {
		if err := setup(e); err != nil {
			return err
		}
		mu.Lock()
		u, err := url.Parse(storetest.NewPostgres(t))
		mu.Unlock()
		if err != nil {
			return err
		}
		// The same database with its password in the query.
		q := *u
		v := q.Query()
		v.Set("password", testPassword)
		q.RawQuery = v.Encode()
		e.Setenv("DB_URL_QUERY_PASSWORD", q.String())
		u.User = url.UserPassword(u.User.Username(), testPassword)
		e.Setenv("PROMETHEUS_MEMORY_DB_URL", u.String())
		e.Setenv("DB_PASSWORD", testPassword)
		e.Setenv("DB_SHOWN", dburl.Shown(u.String()))
		return nil
	}
	testscript.Run(t, p)
}

// The stdio server on PostgreSQL: two agents' servers in one workspace
// share the database, and the project's facts still go to markdown.
func TestStdioPostgres(t *testing.T) {
	e, _ := pgEnv(t)
	one, two := connect(t, e, nil), connect(t, e, nil)
	ok(t, one, "memory_write", map[string]any{"type": "semantic", "key": "test-runner", "body": "Use make test, never go test directly."})
	if got := bodyOf(t, two, "test-runner"); got != "Use make test, never go test directly." {
		t.Errorf("the other server reads %q", got)
	}
	if !found(t, two, "directly", "test-runner") {
		t.Error("the other server's search does not find the write")
	}
	if _, err := os.Stat(filepath.Join(e.root, ".prometheus", "memories", "test-runner.md")); err != nil {
		t.Errorf("no markdown file: %v", err)
	}
	ok(t, two, "memory_delete", map[string]any{"key": "test-runner"})
	if res := call(t, one, "memory_read", map[string]any{"key": "test-runner"}); !res.IsError {
		t.Errorf("deleted through one server, read through the other: %s", text(res))
	}
}

// A team moves from the SQLite file to PostgreSQL with export and import:
// every identity's project, workspace and tenant memory comes along, ids
// and all, and a token made again for the same identity sees it.
func TestTeamMovesToPostgres(t *testing.T) {
	p, _ := pgEnv(t)
	e := newEnv(t)
	s := startTeamServer(t, e, "--rate", "1000")
	ann := connectTeam(t, s, newToken(t, e, "--tenant", "acme", "--user", "ann", "--profile", "laptop"))
	ids := map[string]string{}
	for _, sc := range []string{"project", "workspace", "tenant"} {
		out := ok(t, ann, "memory_write", map[string]any{"type": "semantic", "scope": sc, "key": "moved-" + sc, "body": "kept at the " + sc + " level"})
		ids[sc] = out["record"].(map[string]any)["id"].(string)
	}
	s.stop(t)
	export := filepath.Join(t.TempDir(), "all.jsonl")
	if out, err := e.command("export", "--all-projects", "--out", export).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}

	if out, err := p.command("import", "--keep-projects", export).CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	ps := startTeamServer(t, p, "--rate", "1000")
	again := connectTeam(t, ps, newToken(t, p, "--tenant", "acme", "--user", "ann", "--profile", "laptop"))
	for sc, id := range ids {
		rec := ok(t, again, "memory_read", map[string]any{"key": "moved-" + sc})["record"].(map[string]any)
		if rec["id"] != id || rec["scope"] != sc || rec["body"] != "kept at the "+sc+" level" {
			t.Errorf("%s record on PostgreSQL: %v", sc, rec)
		}
	}
	other := connectTeam(t, ps, newToken(t, p, "--tenant", "acme", "--user", "bob"))
	if !found(t, other, "kept level", "moved-tenant") || found(t, other, "kept level", "moved-workspace") {
		t.Error("bob's view of the moved memory is not his tenant's")
	}
	ps.stop(t)
}

// One replica loses the database while the other keeps it: the load
// balancer's /healthz tells them apart, the other goes on taking writes,
// and once the first is back it reads and finds them all at once, as it
// does the writes made after.
func TestReplicaPartitioned(t *testing.T) {
	e, direct := pgEnv(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, u.Host)
	u.Host = px.addr()
	cut := e
	cut.extra = []string{"PROMETHEUS_MEMORY_DB_URL=" + u.String()}
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	a := startTeamServer(t, cut, "--rate", "1000") // through the proxy
	b := startTeamServer(t, e, "--rate", "1000")
	as, bs := connectTeam(t, a, tok), connectTeam(t, b, tok)
	put := func(cs *mcp.ClientSession, key, body string) {
		t.Helper()
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "scope": "tenant", "key": key, "body": body})
	}
	put(as, "before-cut", "written through the replica about to lose its database")
	if !found(t, bs, "about lose", "before-cut") {
		t.Fatal("the other replica does not find the first write")
	}

	px.cut()
	awaitHealth(t, a, http.StatusServiceUnavailable, 30*time.Second)
	if code, body := health(t, b); code != http.StatusOK {
		t.Errorf("the replica that keeps its database: /healthz %d %s", code, body)
	}
	words := []string{"narwhal", "ocelot", "pangolin", "quetzal", "raccoon"}
	for _, w := range words {
		put(bs, "while-cut-"+w, "the "+w+" arrived while the other replica was cut off")
	}
	ok(t, bs, "memory_update", map[string]any{"key": "before-cut", "type": "semantic", "scope": "tenant", "body": "rewritten while the first replica was away"})

	px.restore()
	awaitHealth(t, a, http.StatusOK, 60*time.Second)
	for _, w := range words {
		if !found(t, as, w, "while-cut-"+w) {
			t.Errorf("back from the cut, the replica does not find %s", w)
		}
		if got := bodyOf(t, as, "while-cut-"+w); !strings.Contains(got, w) {
			t.Errorf("back from the cut, the replica reads %q", got)
		}
	}
	if got := bodyOf(t, as, "before-cut"); got != "rewritten while the first replica was away" {
		t.Errorf("back from the cut, the replica reads the old body: %q", got)
	}
	if found(t, as, "about lose", "before-cut") {
		t.Error("back from the cut, the replica searches the old body")
	}
	// And it goes on seeing the other's writes at once.
	put(bs, "after-cut", "a yak came after the cut")
	if !found(t, as, "yak", "after-cut") {
		t.Error("after the cut, the replica does not find the other's new write")
	}
	put(as, "from-a", "a zebu wrote through the first replica")
	if !found(t, bs, "zebu", "from-a") {
		t.Error("the other replica does not find the first one's write after the cut")
	}
	a.stop(t)
	b.stop(t)
}

// Embeddings on PostgreSQL: two servers share the queue, each record is
// sent once, and both search by meaning; the embed command sees the same.
func TestEmbeddingsPostgres(t *testing.T) {
	e, _ := pgEnv(t)
	srv := standIn(t)
	e = withEmbeddings(e, srv, "toy")
	a, _ := connectLogged(t, e)
	b, _ := connectLogged(t, e)
	writeFact(t, a, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.1)
	writeFact(t, b, "pets", "The kitten sleeps on the sofa.", 0.9)
	writeFact(t, a, "lunch", "Bananas and apples are in the kitchen.", 0.9)
	for _, cs := range []*mcp.ClientSession{a, b} {
		eventually(t, "the shipping fact found by meaning", func() bool {
			r := searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "semantic"})
			return len(r.Results) > 0 && r.Results[0].Key == "shipping-howto" && r.Note == ""
		})
	}
	sent := map[string]int{}
	for _, in := range srv.Inputs() {
		for _, body := range []string{"tag it and run the pipeline", "kitten sleeps", "Bananas and apples"} {
			if strings.Contains(in, body) {
				sent[body]++
			}
		}
	}
	for body, n := range sent {
		if n != 1 {
			t.Errorf("%q sent %d times", body, n)
		}
	}
	if len(sent) != 3 {
		t.Errorf("sent %v, want the three bodies once each", sent)
	}
	out, err := e.command("embed", "--json").Output()
	if err != nil {
		t.Fatalf("embed: %v", err)
	}
	var res embedOut
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Embedded != 0 || res.Status.Vectors != 3 || res.Status.Pending != 0 {
		t.Errorf("embed on PostgreSQL: %+v", res)
	}
}

// Replicas started together on an empty database: one makes the schema,
// the others wait for it, and all of them serve.
func TestReplicasStartTogether(t *testing.T) {
	e, _ := pgEnv(t)
	const n = 4
	servers := make([]*teamServer, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := launchTeamServer(t, e, "--rate", "1000")
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
			servers[i] = s
		}()
	}
	wg.Wait()
	for i, s := range servers {
		if s == nil {
			t.Fatalf("replica %d did not start", i)
		}
	}
	tok := newToken(t, e, "--tenant", "acme", "--user", "ann")
	for i, s := range servers {
		cs := connectTeam(t, s, tok)
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "scope": "tenant", "key": fmt.Sprint("from-", i), "body": "written at start"})
	}
	cs := connectTeam(t, servers[0], tok)
	if got := len(ok(t, cs, "memory_list", nil)["records"].([]any)); got != n {
		t.Errorf("%d records, want %d", got, n)
	}
	for _, s := range servers {
		s.stop(t)
	}
}
