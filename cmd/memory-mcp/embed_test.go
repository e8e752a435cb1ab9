package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/embed/embedtest"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/scope"
)

// syncBuffer collects a process's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// connectLogged is connect keeping the server's stderr for the test.
func connectLogged(t *testing.T, e env) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := e.command()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr)
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr)
		}
	})
	return cs, stderr
}

// standIn starts the loopback embeddings server.
func standIn(t *testing.T) *embedtest.Server {
	t.Helper()
	srv, err := embedtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// withEmbeddings is e configured for srv's model.
func withEmbeddings(e env, srv *embedtest.Server, model string) env {
	e.extra = append(append([]string(nil), e.extra...),
		"PROMETHEUS_MEMORY_EMBEDDINGS_URL="+srv.URL, "PROMETHEUS_MEMORY_EMBEDDINGS_MODEL="+model)
	if srv.Key() != "" {
		e.extra = append(e.extra, "PROMETHEUS_MEMORY_EMBEDDINGS_KEY="+srv.Key())
	}
	return e
}

type searchResult struct {
	Results []struct {
		Key   string  `json:"key"`
		Score float64 `json:"score"`
	} `json:"results"`
	Mode string `json:"mode"`
	Note string `json:"note"`
}

func searchFor(t *testing.T, cs *mcp.ClientSession, args map[string]any) searchResult {
	t.Helper()
	out := ok(t, cs, "memory_search", args)
	b, _ := json.Marshal(out)
	var r searchResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r searchResult) keys() []string {
	var ks []string
	for _, h := range r.Results {
		ks = append(ks, h.Key)
	}
	return ks
}

// eventually polls cond until it holds, failing after a generous while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

func writeFact(t *testing.T, cs *mcp.ClientSession, key, body string, confidence float64) {
	t.Helper()
	ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": key, "body": body, "confidence": confidence})
}

const deployQuery = "how do we deploy to production"

func TestSemanticAndHybridEndToEnd(t *testing.T) {
	srv := standIn(t)
	srv.SetKey("local-test-key")
	cs, _ := connectLogged(t, withEmbeddings(newEnv(t), srv, "toy"))
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.1)
	writeFact(t, cs, "pets", "The kitten sleeps on the sofa.", 0.9)
	writeFact(t, cs, "lunch", "Bananas and apples are in the kitchen.", 0.9)
	writeFact(t, cs, "backup-job", "Run the postgres backup every night from the ops box with the usual retention.", 0.9)
	writeFact(t, cs, "datastores", "database db sql sqlite datastore", 0.9)

	// Written, then embedded in the background: found by meaning.
	eventually(t, "the shipping fact found by meaning", func() bool {
		r := searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "semantic"})
		return len(r.Results) > 0 && r.Results[0].Key == "shipping-howto"
	})
	eventually(t, "every record embedded", func() bool {
		return searchFor(t, cs, map[string]any{"query": deployQuery}).Note == ""
	})
	if r := searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "semantic"}); r.Results[0].Score < 0.9 {
		t.Fatalf("semantic score %v", r.Results[0].Score)
	}
	def := searchFor(t, cs, map[string]any{"query": deployQuery})
	if def.Mode != "hybrid" || len(def.Results) == 0 || def.Results[0].Key != "shipping-howto" {
		t.Fatalf("default search: %+v", def)
	}
	kw := searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "keyword"})
	if kw.Mode != "keyword" || len(kw.Results) != 0 {
		t.Fatalf("keyword mode found %v for a query sharing no word", kw.keys())
	}
	// Exact keyword hits first in hybrid, though a fuzzy neighbour is
	// nearer by meaning.
	sem := searchFor(t, cs, map[string]any{"query": "postgres backup", "mode": "semantic"})
	if len(sem.Results) == 0 || sem.Results[0].Key != "datastores" {
		t.Fatalf("semantic: %v; the test needs the neighbour nearest by meaning", sem.keys())
	}
	hy := searchFor(t, cs, map[string]any{"query": "postgres backup", "mode": "hybrid"})
	if len(hy.Results) < 2 || hy.Results[0].Key != "backup-job" || hy.Results[0].Score < hy.Results[1].Score {
		t.Fatalf("hybrid: %+v", hy)
	}
	cut := searchFor(t, cs, map[string]any{"query": "postgres backup", "min_score": hy.Results[1].Score + 1e-6})
	if len(cut.Results) != 1 || cut.Results[0].Key != "backup-job" {
		t.Fatalf("min_score on the fused score: %+v", cut)
	}
	// Woven recall with a query puts what it means first, though its
	// confidence is the lowest.
	read := ok(t, cs, "memory_read", map[string]any{"query": deployQuery})
	block, _ := read["block"].(string)
	if i, j := strings.Index(block, "tag it and run the pipeline"), strings.Index(block, "kitten"); i < 0 || j < 0 || i > j {
		t.Fatalf("recall block does not lead with the relevant fact:\n%s", block)
	}
	if srv.BadAuth() != 0 {
		t.Fatalf("%d requests came without the key", srv.BadAuth())
	}
	// An update is embedded again; a delete is forgotten.
	ok(t, cs, "memory_update", map[string]any{"key": "shipping-howto", "body": "Feed the feline twice a day."})
	eventually(t, "the updated fact found by its new meaning", func() bool {
		r := searchFor(t, cs, map[string]any{"query": "cat", "mode": "semantic"})
		return strings.Contains(strings.Join(r.keys(), ","), "shipping-howto") && r.Note == ""
	})
	// Its key still says shipping; its body no longer does.
	for _, h := range searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "semantic"}).Results {
		if h.Key == "shipping-howto" && h.Score > 0.8 {
			t.Fatalf("the old text's vector still answers: score %v", h.Score)
		}
	}
	ok(t, cs, "memory_delete", map[string]any{"key": "pets"})
	for _, k := range searchFor(t, cs, map[string]any{"query": "kitten", "mode": "semantic"}).keys() {
		if k == "pets" {
			t.Fatal("a deleted record is still found by meaning")
		}
	}
}

func TestEndpointDownThenBack(t *testing.T) {
	srv, err := embedtest.Unstarted()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e := withEmbeddings(newEnv(t), srv, "toy")
	cs, stderr := connectLogged(t, e)
	// Writes succeed while nothing listens.
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.5)
	writeFact(t, cs, "pets", "The kitten sleeps on the sofa.", 0.5)
	r := searchFor(t, cs, map[string]any{"query": "kitten"})
	if r.Mode != "keyword" || !strings.Contains(r.Note, "answered by keyword") || len(r.Results) != 1 {
		t.Fatalf("search with the endpoint down: %+v", r)
	}
	eventually(t, "the outage logged", func() bool { return strings.Contains(stderr.String(), "embeddings endpoint unavailable") })
	cs.Close()

	// The queue outlives the process: the next server embeds them.
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	cs2, _ := connectLogged(t, e)
	eventually(t, "records stored while the endpoint was down found by meaning", func() bool {
		r := searchFor(t, cs2, map[string]any{"query": deployQuery, "mode": "semantic"})
		return len(r.Results) > 0 && r.Results[0].Key == "shipping-howto"
	})

	// Down and back within one run.
	srv.Down()
	writeFact(t, cs2, "car-notes", "The automobile is parked outside.", 0.5)
	if r := searchFor(t, cs2, map[string]any{"query": "vehicle", "mode": "semantic"}); r.Mode != "keyword" || r.Note == "" {
		t.Fatalf("semantic search with the endpoint down: %+v", r)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the record written during the outage found once it is back", func() bool {
		r := searchFor(t, cs2, map[string]any{"query": "vehicle", "mode": "semantic"})
		return len(r.Results) > 0 && r.Results[0].Key == "car-notes"
	})
}

func TestModelChangeReembedsEndToEnd(t *testing.T) {
	srv := standIn(t)
	base := newEnv(t)
	cs, _ := connectLogged(t, withEmbeddings(base, srv, "toy-a"))
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.5)
	writeFact(t, cs, "pets", "The kitten sleeps on the sofa.", 0.5)
	writeFact(t, cs, "lunch", "Bananas and apples are in the kitchen.", 0.5)
	eventually(t, "embedded with model a", func() bool {
		r := searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "semantic"})
		return len(r.Results) > 0 && r.Note == ""
	})
	cs.Close()

	// Model b: while its re-embedding is held back, a search by b finds
	// nothing rather than reading a's vectors, and says why.
	srv.HoldBatches()
	cs2, stderr := connectLogged(t, withEmbeddings(base, srv, "toy-b"))
	r := searchFor(t, cs2, map[string]any{"query": deployQuery, "mode": "semantic"})
	if len(r.Results) != 0 || !strings.Contains(r.Note, "3 records are still waiting") {
		t.Fatalf("before re-embedding: %+v", r)
	}
	eventually(t, "progress logged for the new model", func() bool { return strings.Contains(stderr.String(), "new model") })
	srv.Release()
	eventually(t, "re-embedded with model b", func() bool {
		r := searchFor(t, cs2, map[string]any{"query": deployQuery, "mode": "semantic"})
		return len(r.Results) > 0 && r.Results[0].Key == "shipping-howto" && r.Note == ""
	})
	if n := srv.Models()["toy-b"]; n < 3 {
		t.Fatalf("model b embedded %d inputs", n)
	}
}

func TestNothingSentWithoutConfiguration(t *testing.T) {
	srv := standIn(t)
	e := newEnv(t)
	// The stand-in listens, but nothing tells the server about it.
	cs, _ := connectLogged(t, e)
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.5)
	r := searchFor(t, cs, map[string]any{"query": "ship release"})
	if r.Mode != "keyword" || r.Note != "" || len(r.Results) != 1 {
		t.Fatalf("default search: %+v", r)
	}
	r = searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "hybrid"})
	if r.Mode != "keyword" || !strings.Contains(r.Note, "PROMETHEUS_MEMORY_EMBEDDINGS_URL") {
		t.Fatalf("hybrid asked for: %+v", r)
	}
	ok(t, cs, "memory_read", map[string]any{"query": deployQuery})
	out, err := e.command("embed").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no embeddings endpoint is configured") {
		t.Fatalf("embed without configuration: %v: %s", err, out)
	}
	time.Sleep(200 * time.Millisecond) // a background call would have been made by now
	if n := srv.Requests(); n != 0 {
		t.Fatalf("%d requests reached an endpoint nobody configured", n)
	}
}

func TestSecretsNeverReachTheEndpoint(t *testing.T) {
	srv := standIn(t)
	cs, _ := connectLogged(t, withEmbeddings(newEnv(t), srv, "toy"))
	secret := "AKIA" + "Z7QW3RTY5UXP2KLM"
	msg := fails(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "aws", "body": "the key is " + secret})
	if !strings.HasPrefix(msg, "secret_rejected") {
		t.Fatalf("write: %s", msg)
	}
	capture := ok(t, cs, "memory_capture", map[string]any{"session_id": "s1", "plan": "deploy",
		"outcome": "shipped with " + secret, "statements": []string{"Always use key " + secret}})
	if refused, _ := capture["refused"].([]any); len(refused) == 0 {
		t.Fatalf("capture kept a secret: %v", capture)
	}
	r := searchFor(t, cs, map[string]any{"query": "where is " + secret, "mode": "semantic"})
	if r.Mode != "keyword" || !strings.Contains(r.Note, "secret") {
		t.Fatalf("a query holding a secret: %+v", r)
	}
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.5)
	eventually(t, "the clean record embedded", func() bool {
		r := searchFor(t, cs, map[string]any{"query": deployQuery, "mode": "semantic"})
		return len(r.Results) > 0 && r.Note == ""
	})
	for _, in := range srv.Inputs() {
		if strings.Contains(in, secret[:12]) {
			t.Fatalf("the endpoint received a secret: %q", in)
		}
	}
}

func TestEmbedCommand(t *testing.T) {
	srv, err := embedtest.Unstarted()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e := withEmbeddings(newEnv(t), srv, "toy")
	var b bytes.Buffer
	for i := range 40 {
		b.WriteString(`{"scope":"project","type":"semantic","key":"fact-` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `","body":"ship the release"}` + "\n")
	}
	file := t.TempDir() + "/facts.jsonl"
	must(t, os.WriteFile(file, b.Bytes(), 0o600))
	if out, err := e.command("import", file).CombinedOutput(); err != nil {
		t.Fatalf("import: %v: %s", err, out)
	}
	// Down: the command fails, saying so, and keeps the queue.
	out, err := e.command("embed").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot connect") || !strings.Contains(string(out), "stay queued") {
		t.Fatalf("embed with the endpoint down: %v: %s", err, out)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	out, err = e.command("embed", "--json").Output()
	if err != nil {
		t.Fatalf("embed: %v: %s", err, out)
	}
	var res embedOut
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Embedded != 40 || res.Status.Vectors != 40 || res.Status.Pending != 0 || res.Status.Dims != embedtest.Dims {
		t.Fatalf("%+v", res)
	}
	if bytes.Contains(out, []byte("embedding [")) {
		t.Fatal("a progress bar went into a pipe")
	}
	out, err = e.command("embed").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "embedded 0 records with toy (40 records have a vector") {
		t.Fatalf("nothing left: %v: %s", err, out)
	}
	if out, err := e.command("embed", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage: memory-mcp embed") {
		t.Fatalf("--help: %v: %s", err, out)
	}
	// The CLI search reads the vectors too.
	out, err = e.command("search", "--mode", "semantic", "deploy").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fact-") {
		t.Fatalf("search --mode semantic: %v: %s", err, out)
	}

	// On a terminal the command draws a bar.
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to make a terminal")
	}
	must(t, os.WriteFile(file, bytes.ReplaceAll(b.Bytes(), []byte("ship the release"), []byte("a kitten")), 0o600))
	if out, err := e.command("import", file).CombinedOutput(); err != nil {
		t.Fatalf("import: %v: %s", err, out)
	}
	sh := exec.Command("script", "-qfec", binary+" embed", os.DevNull)
	sh.Env = e.vars()
	sh.Dir = e.root
	out, err = sh.CombinedOutput()
	if err != nil {
		t.Skipf("script: %v: %s", err, out)
	}
	if !bytes.Contains(out, []byte("embedding [")) || !bytes.Contains(out, []byte("embedded 40 records")) {
		t.Fatalf("no progress on a terminal: %q", out)
	}
}

func TestDoctorChecksTheModel(t *testing.T) {
	srv := standIn(t)
	srv.SetKey("right-key")
	e := withEmbeddings(newEnv(t), srv, "toy")
	out, _ := e.command("doctor").CombinedOutput()
	if !strings.Contains(string(out), "embeds with toy (40 dimensions)") {
		t.Fatalf("doctor: %s", out)
	}
	bad := e
	bad.extra = append(append([]string(nil), e.extra...), "PROMETHEUS_MEMORY_EMBEDDINGS_KEY=wrong-key-value")
	out, err := bad.command("doctor").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the key was refused") || strings.Contains(string(out), "wrong-key-value") {
		t.Fatalf("doctor with a wrong key: %v: %s", err, out)
	}
}

// TestRealModel runs against a real embeddings server when
// MEMORY_MCP_TEST_EMBEDDINGS_URL is set (and _MODEL, default
// nomic-embed-text; _KEY if it needs one).
func TestRealModel(t *testing.T) {
	url := os.Getenv("MEMORY_MCP_TEST_EMBEDDINGS_URL")
	if url == "" {
		t.Skip("MEMORY_MCP_TEST_EMBEDDINGS_URL is not set")
	}
	model := os.Getenv("MEMORY_MCP_TEST_EMBEDDINGS_MODEL")
	if model == "" {
		model = "nomic-embed-text"
	}
	e := newEnv(t)
	e.extra = []string{"PROMETHEUS_MEMORY_EMBEDDINGS_URL=" + url, "PROMETHEUS_MEMORY_EMBEDDINGS_MODEL=" + model,
		"PROMETHEUS_MEMORY_EMBEDDINGS_KEY=" + os.Getenv("MEMORY_MCP_TEST_EMBEDDINGS_KEY")}
	cs, _ := connectLogged(t, e)
	writeFact(t, cs, "pets", "The kitten naps on the sofa every afternoon.", 0.5)
	writeFact(t, cs, "release-process", "Releases are tagged on main and shipped by the CI pipeline.", 0.5)
	writeFact(t, cs, "lunch", "Bananas and apples are in the kitchen.", 0.5)
	eventually(t, "found by meaning with a real model", func() bool {
		r := searchFor(t, cs, map[string]any{"query": "where does the cat sleep", "mode": "semantic"})
		return len(r.Results) > 0 && r.Results[0].Key == "pets" && r.Note == ""
	})
	r := searchFor(t, cs, map[string]any{"query": "how do we deploy to production"})
	if r.Mode != "hybrid" || len(r.Results) == 0 || r.Results[0].Key != "release-process" {
		t.Fatalf("hybrid with a real model: %+v", r)
	}
}

// TestServersShareTheWork runs two servers on one database, as two agents
// do: each record is sent to the endpoint once, not once per server.
func TestServersShareTheWork(t *testing.T) {
	srv := standIn(t)
	e := withEmbeddings(newEnv(t), srv, "toy")
	a, _ := connectLogged(t, e)
	b, _ := connectLogged(t, e)
	// While the endpoint holds its answers, both servers see the queue;
	// only the one holding the lease may send it.
	srv.Hold()
	bodies := map[string]bool{}
	for i := range 12 {
		cs := a
		if i%2 == 1 {
			cs = b
		}
		body := "Ship release number " + string(rune('a'+i)) + " on time."
		bodies[body] = true
		writeFact(t, cs, "release-"+string(rune('a'+i)), body, 0.5)
	}
	eventually(t, "a batch sent", func() bool { return srv.Requests() > 0 })
	time.Sleep(3 * time.Second) // both servers look at the queue meanwhile
	if n := srv.Requests(); n != 1 {
		t.Errorf("%d batches in flight at once", n)
	}
	srv.Release()
	eventually(t, "every record embedded", func() bool {
		r := searchFor(t, a, map[string]any{"query": deployQuery, "mode": "semantic", "limit": 20})
		return len(r.Results) == 12 && r.Note == ""
	})
	sent := map[string]int{}
	for _, in := range srv.Inputs() {
		for body := range bodies {
			if strings.Contains(in, body) {
				sent[body]++
			}
		}
	}
	for body := range bodies {
		if sent[body] != 1 {
			t.Errorf("%q sent %d times", body, sent[body])
		}
	}
}

// TestSlowEndpointAnswersByKeyword: an endpoint that does not answer in
// time costs one search the wait; the searches after it answer by keyword
// at once, without asking it, for a while.
func TestSlowEndpointAnswersByKeyword(t *testing.T) {
	srv := standIn(t)
	vars := map[string]string{"PROMETHEUS_MEMORY_DB_PATH": t.TempDir() + "/memory.db", "PROMETHEUS_WORKSPACE_ROOT": t.TempDir(),
		"PROMETHEUS_MEMORY_EMBEDDINGS_URL": srv.URL, "PROMETHEUS_MEMORY_EMBEDDINGS_MODEL": "toy"}
	cfg, err := loadConfig(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := openApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }()
	a.Embed.QueryTimeout = 100 * time.Millisecond
	ctx := context.Background()
	if _, _, err := a.Store.Put(ctx, a.Proj, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "pets", Body: "a kitten"}); err != nil {
		t.Fatal(err)
	}
	srv.Hold()
	defer srv.Release()
	search := func() (semantic.Mode, string, int) {
		hits, mode, note, err := a.Search(ctx, cfg.Project, "", memory.SearchOptions{Query: "kitten"})
		if err != nil {
			t.Fatal(err)
		}
		return mode, note, len(hits)
	}
	mode, note, n := search()
	if mode != semantic.ModeKeyword || !strings.Contains(note, "no answer in time") || n != 1 {
		t.Fatalf("first search: %s %q %d", mode, note, n)
	}
	asked := srv.Requests()
	mode, note, n = search()
	if mode != semantic.ModeKeyword || !strings.Contains(note, "did not answer in time lately") || n != 1 {
		t.Fatalf("second search: %s %q %d", mode, note, n)
	}
	if srv.Requests() != asked {
		t.Fatal("the second search asked the slow endpoint again")
	}
	// A team server's callers did not configure the endpoint: notes never
	// show where it is.
	srv.Release()
	srv.Down()
	// A server started now has not seen the endpoint time out.
	a.Close()
	if a, err = openApp(ctx, cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	mode, note, _ = search()
	if u, _ := url.Parse(srv.URL); mode != semantic.ModeKeyword || strings.Contains(note, u.Host) || !strings.Contains(note, "could not be used") {
		t.Fatalf("search with the endpoint down: %s %q", mode, note)
	}
}

// Credentials written into the endpoint's URL, as user:password or in its
// query, never show in what doctor prints, whether the endpoint answers
// or not.
func TestDoctorNeverShowsCredentialsOfTheURL(t *testing.T) {
	up := standIn(t)
	down, err := embedtest.Unstarted()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	for _, srv := range []*embedtest.Server{up, down} {
		u := strings.Replace(srv.URL, "http://", "http://user-in-url:password-in-url@", 1) + "?api-key=key-in-query"
		e := newEnv(t)
		e.extra = append(e.extra, "PROMETHEUS_MEMORY_EMBEDDINGS_URL="+u, "PROMETHEUS_MEMORY_EMBEDDINGS_MODEL=toy")
		out, _ := e.command("doctor").CombinedOutput()
		if !strings.Contains(string(out), "embeddings") {
			t.Fatalf("doctor says nothing of embeddings: %s", out)
		}
		for _, secret := range []string{"user-in-url", "password-in-url", "key-in-query"} {
			if strings.Contains(string(out), secret) {
				t.Errorf("doctor shows %q: %s", secret, out)
			}
		}
	}
}

// A keyword search, by the tool, by woven recall asked for keywords, or
// by the command line, never sends its query to the endpoint.
func TestKeywordModeSendsNothing(t *testing.T) {
	srv := standIn(t)
	e := withEmbeddings(newEnv(t), srv, "toy")
	cs, _ := connectLogged(t, e)
	const word = "quokkazanzibar"
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.5)
	r := searchFor(t, cs, map[string]any{"query": "ship " + word, "mode": "keyword"})
	if r.Mode != "keyword" || len(r.Results) != 1 {
		t.Fatalf("keyword search: %+v", r)
	}
	if out, err := e.command("search", "--mode", "keyword", word+" release").CombinedOutput(); err != nil {
		t.Fatalf("search --mode keyword: %v: %s", err, out)
	}
	for _, in := range srv.Inputs() {
		if strings.Contains(in, word) {
			t.Fatalf("a keyword query reached the endpoint: %q", in)
		}
	}
}

// An endpoint that answers with vectors of no direction (all zeros) is
// not usable: searches answer by keyword and say why, never an error.
func TestZeroVectorsAnswerByKeyword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		var b strings.Builder
		b.WriteString(`{"data":[`)
		for i := range req.Input {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"index":%d,"embedding":[0,0,0,0]}`, i)
		}
		b.WriteString("]}")
		w.Write([]byte(b.String()))
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t)
	e.extra = append(e.extra, "PROMETHEUS_MEMORY_EMBEDDINGS_URL="+srv.URL+"/v1", "PROMETHEUS_MEMORY_EMBEDDINGS_MODEL=zeros")
	cs, stderr := connectLogged(t, e)
	writeFact(t, cs, "shipping-howto", "To ship a release, tag it and run the pipeline.", 0.5)
	for _, mode := range []string{"semantic", "hybrid"} {
		r := searchFor(t, cs, map[string]any{"query": "ship release", "mode": mode})
		if r.Mode != "keyword" || !strings.Contains(r.Note, "could not be used") || len(r.Results) != 1 {
			t.Errorf("%s: %+v", mode, r)
		}
	}
	if !strings.Contains(stderr.String(), "all zeros") {
		t.Error("the log does not say why the endpoint could not be used")
	}
}
