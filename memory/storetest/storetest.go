// Package storetest is the suite every store backend must pass: the same
// calls, the same results, on SQLite and on PostgreSQL. A backend's test
// calls Run with a function that makes an empty database and returns what
// memory.Open takes for it (a file path or a postgres:// URL). NewPostgres
// makes such a database for any test that needs PostgreSQL.
//
// It imports memory, its two backends (memory/sqlite, memory/postgres),
// scope, memory/embed and its loopback stand-in, pgx (to make and drop
// test databases), and the standard library.
package storetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/backend"
	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/memory/embed/embedtest"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/memory/token"
	"prom.codes/memory-mcp/scope"
)

// NewDB makes an empty database for t and returns its target for
// memory.Open.
type NewDB func(t *testing.T) string

// Clock is a settable clock for memory.Options.Now.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed time.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// OpenTarget opens the store at target (see backend.Open).
func OpenTarget(ctx context.Context, target string, opts *memory.Options) (*memory.Store, error) {
	return backend.Open(ctx, target, opts)
}

// Open opens target for t with clock c (nil: the real time), closing it
// when t ends.
func Open(t testing.TB, target string, c *Clock) *memory.Store {
	t.Helper()
	opts := &memory.Options{}
	if c != nil {
		opts.Now = c.Now
	}
	s, err := OpenTarget(context.Background(), target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	ctx   = context.Background()
	projA = memory.Project{ID: scope.IdentityOf("/work/a")}
	projB = memory.Project{ID: scope.IdentityOf("/work/b")}
)

// Run runs the suite, each test on a database of its own from newDB.
func Run(t *testing.T, newDB NewDB) {
	tests := []struct {
		name string
		fn   func(*testing.T, NewDB)
	}{
		{"PutGetUpdateDelete", testPutGetUpdateDelete},
		{"FactAndProcedureShareAFile", testFactAndProcedure},
		{"ScopeChain", testScopeChain},
		{"TeamIdentitiesIsolated", testTeamIdentities},
		{"ListOrderAndCursor", testList},
		{"SearchRanks", testSearch},
		{"ExpiryAndPurge", testExpiry},
		{"CapturePromotes", testCapture},
		{"SecretsRefused", testSecrets},
		{"Tokens", testTokens},
		{"Embeddings", testEmbeddings},
		{"CountsAndUses", testCounts},
		{"UsesOfTwoStoresAddUp", testUsesAddUp},
		{"MirrorState", testMirrorState},
		{"Cache", testCache},
		{"MoveProject", testMoveProject},
		{"TwoStoresSeeEachOther", testTwoStores},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentMigration", testConcurrentMigration},
		{"BytesPostgresCannotHold", testUnstorableBytes},
		{"RestOfTheStore", testRestOfTheStore},
		{"ConcurrentCaptures", testConcurrentCaptures},
		{"LongStatementConfirmed", testLongStatement},
		{"ExpiryAcrossStores", testExpiryAcrossStores},
		{"RevokeWhileAuthenticating", testRevokeWhileAuthenticating},
		{"LongBodyPreviews", testLongBodyPreviews},
		{"HitsShowChangesFromAnotherStore", testHitsAcrossStores},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newDB) })
	}
}

func put(t testing.TB, s *memory.Store, p memory.Project, w memory.Write) memory.Record {
	t.Helper()
	r, _, err := s.Put(ctx, p, w)
	if err != nil {
		t.Fatalf("put %s: %v", w.Key, err)
	}
	return r
}

func fact(key, body string) memory.Write {
	return memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: body}
}

func testPutGetUpdateDelete(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	r, replaced, err := s.Put(ctx, projA, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "db-choice",
		Description: "which database", Body: "We use PostgreSQL 15.", Tags: []string{"db", "infra"}, Metadata: map[string]string{"by": "ann"}})
	if err != nil || !replaced {
		t.Fatalf("put = %v, new %v", err, replaced)
	}
	got, err := s.Get(ctx, projA.ID, memory.Selector{Key: "db-choice"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.Body != "We use PostgreSQL 15." || got.Description != "which database" ||
		strings.Join(got.Tags, ",") != "db,infra" || got.Metadata["by"] != "ann" || got.Confidence != r.Confidence {
		t.Fatalf("get = %+v, want %+v", got, r)
	}
	if !got.CreatedAt.Equal(r.CreatedAt) || !got.UpdatedAt.Equal(r.UpdatedAt) {
		t.Errorf("times = %v %v, want %v %v", got.CreatedAt, got.UpdatedAt, r.CreatedAt, r.UpdatedAt)
	}
	if byID, err := s.Get(ctx, projA.ID, memory.Selector{ID: r.ID}); err != nil || byID.Key != "db-choice" {
		t.Fatalf("get by id = %+v, %v", byID, err)
	}
	again, replaced, err := s.Put(ctx, projA, fact("db-choice", "We use PostgreSQL 16."))
	if err != nil || replaced || again.ID != r.ID {
		t.Fatalf("put again = %+v, %v, new %v", again, err, replaced)
	}
	body := "Now 17."
	up, err := s.Update(ctx, projA, memory.Selector{Key: "db-choice"}, memory.Patch{Body: &body})
	if err != nil || up.Body != body {
		t.Fatalf("update = %+v, %v", up, err)
	}
	if got, _ := s.Get(ctx, projA.ID, memory.Selector{Key: "db-choice"}); got.Body != body {
		t.Fatalf("after update body = %q", got.Body)
	}
	if _, err := s.Delete(ctx, projA, memory.Selector{Key: "db-choice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, projA.ID, memory.Selector{Key: "db-choice"}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("get after delete = %v, want not found", err)
	}
	if _, err := s.Delete(ctx, projA, memory.Selector{Key: "db-choice"}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("second delete = %v, want not found", err)
	}
}

// testFactAndProcedure: a project fact and a project procedure under one
// key would share a markdown file, so the second is a conflict that
// changes nothing; the first is rewritten in place.
func testFactAndProcedure(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	first := put(t, s, projA, fact("deploy", "Deploys go through the release branch."))
	_, _, err := s.Put(ctx, projA, memory.Write{Scope: scope.Project, Type: memory.Procedural, Key: "deploy", Body: "Tag, push."})
	if !errors.Is(err, memory.ErrConflict) {
		t.Fatalf("procedure over a fact's key: %v, want a conflict", err)
	}
	again, created, err := s.Put(ctx, projA, fact("deploy", "Deploys go through the release branch, signed."))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("rewrite = %+v, created %v, %v", again, created, err)
	}
	if _, err := s.Get(ctx, projA.ID, memory.Selector{Key: "deploy", Type: memory.Procedural}); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("a procedure was stored beside the fact: %v", err)
	}
}

func testScopeChain(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	put(t, s, projA, memory.Write{Scope: scope.System, Type: memory.Semantic, Key: "style", Body: "system style"})
	put(t, s, projA, memory.Write{Scope: scope.Tenant, Type: memory.Semantic, Key: "style", Body: "tenant style"})
	put(t, s, projA, memory.Write{Scope: scope.Workspace, Type: memory.Semantic, Key: "style", Body: "workspace style"})
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "style", Body: "project A style"})
	if got, err := s.Get(ctx, projA.ID, memory.Selector{Key: "style"}); err != nil || got.Body != "project A style" {
		t.Fatalf("A sees %q, %v; want its own", got.Body, err)
	}
	if got, err := s.Get(ctx, projB.ID, memory.Selector{Key: "style"}); err != nil || got.Body != "workspace style" {
		t.Fatalf("B sees %q, %v; want the workspace's", got.Body, err)
	}
	ws := scope.Workspace
	if got, err := s.Get(ctx, projA.ID, memory.Selector{Key: "style", Scope: &ws}); err != nil || got.Body != "workspace style" {
		t.Fatalf("A at workspace sees %q, %v", got.Body, err)
	}
	put(t, s, projB, fact("only-b", "B's own"))
	if _, err := s.Get(ctx, projA.ID, memory.Selector{Key: "only-b"}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("A reads B's project record: %v", err)
	}
	rs, _, err := s.List(ctx, projA.ID, memory.ListOptions{})
	if err != nil || len(rs) != 1 || rs[0].Scope != scope.Project {
		t.Fatalf("list A = %+v, %v; want one effective record", rs, err)
	}
	eff, err := s.Effective(ctx, projB.ID, []memory.Type{memory.Semantic}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, r := range eff {
		bodies = append(bodies, r.Body)
	}
	if strings.Join(bodies, "|") != "workspace style|B's own" && strings.Join(bodies, "|") != "B's own|workspace style" {
		t.Fatalf("effective B = %q", bodies)
	}
}

func testTeamIdentities(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	ann := memory.Project{ID: memory.TeamIdentity("acme", "ann", "default")}
	annWork := memory.Project{ID: memory.TeamIdentity("acme", "ann", "work")}
	bob := memory.Project{ID: memory.TeamIdentity("acme", "bob", "default")}
	other := memory.Project{ID: memory.TeamIdentity("globex", "ann", "default")}
	put(t, s, ann, memory.Write{Scope: scope.Workspace, Type: memory.Semantic, Key: "editor", Body: "ann uses vim"})
	put(t, s, ann, memory.Write{Scope: scope.Tenant, Type: memory.Semantic, Key: "ci", Body: "acme uses jenkins"})
	put(t, s, ann, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "todo", Body: "ann's default profile"})
	check := func(p memory.Project, key, want string) {
		t.Helper()
		got, err := s.Get(ctx, p.ID, memory.Selector{Key: key})
		if want == "" {
			if !errors.Is(err, memory.ErrNotFound) {
				t.Errorf("%s reads %s = %q, %v; want not found", p.ID, key, got.Body, err)
			}
			return
		}
		if err != nil || got.Body != want {
			t.Errorf("%s reads %s = %q, %v; want %q", p.ID, key, got.Body, err, want)
		}
	}
	check(annWork, "editor", "ann uses vim")
	check(annWork, "todo", "")
	check(bob, "editor", "")
	check(bob, "ci", "acme uses jenkins")
	check(other, "ci", "")
	check(other, "editor", "")
	if hits, err := s.Search(ctx, other.ID, memory.SearchOptions{Query: "jenkins vim"}); err != nil || len(hits) != 0 {
		t.Errorf("another tenant finds %d hits, %v", len(hits), err)
	}
}

func testList(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	var want []string
	for i := 24; i >= 0; i-- {
		k := fmt.Sprintf("key-%02d", i)
		put(t, s, projA, fact(k, "body "+k))
		want = append([]string{k}, want...)
	}
	put(t, s, projA, memory.Write{Scope: scope.Workspace, Type: memory.Procedural, Key: "key-03", Body: "1. a step"})
	// By bytes, as SQLite orders them: '-' < '.' < digits < '_' < letters,
	// where a natural-language collation would skip the punctuation.
	for _, k := range []string{"ka", "k_a", "k0", "k.a", "k-a"} {
		put(t, s, projA, fact(k, "punctuated"))
	}
	want = append([]string{"k-a", "k.a", "k0", "k_a", "ka"}, want...)
	want = append(want[:9], append([]string{"key-03"}, want[9:]...)...)
	var got []string
	cursor := ""
	pages := 0
	for {
		rs, next, err := s.List(ctx, projA.ID, memory.ListOptions{Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			got = append(got, r.Key)
		}
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 5 {
		t.Fatalf("pages %d of\n%v\nwant\n%v", pages, got, want)
	}
	rs, _, err := s.List(ctx, projA.ID, memory.ListOptions{Type: memory.Procedural})
	if err != nil || len(rs) != 1 || rs[0].Key != "key-03" {
		t.Fatalf("list procedures = %+v, %v", rs, err)
	}
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "tagged", Body: "x", Tags: []string{"blue", "green"}})
	rs, _, err = s.List(ctx, projA.ID, memory.ListOptions{Tag: "green"})
	if err != nil || len(rs) != 1 || rs[0].Key != "tagged" {
		t.Fatalf("list by tag = %+v, %v", rs, err)
	}
	if _, _, err := s.List(ctx, projA.ID, memory.ListOptions{Cursor: "not a cursor"}); !errors.Is(err, memory.ErrInvalidArgument) {
		t.Errorf("bad cursor = %v", err)
	}
}

// Corpus is the records search ranking is compared on.
var Corpus = []memory.Write{
	{Scope: scope.Project, Type: memory.Semantic, Key: "deploy-process", Description: "how we deploy", Body: "Deploys go through the release pipeline; tag, then run deploy.", Tags: []string{"deploy"}},
	{Scope: scope.Project, Type: memory.Semantic, Key: "database", Body: "The service stores its data in PostgreSQL; migrations run on deploy."},
	{Scope: scope.Project, Type: memory.Procedural, Key: "rollback", Body: "1. find the last good tag\n2. deploy it\n3. tell the channel"},
	{Scope: scope.Workspace, Type: memory.Semantic, Key: "editor", Body: "Tabs, not spaces, in Go files."},
	{Scope: scope.Project, Type: memory.Semantic, Key: "pipelines", Body: "Pipelines run in CI on every push; deploy pipelines need approval."},
	{Scope: scope.Project, Type: memory.Episodic, Key: "session-1", Body: "We fixed the deploy script and talked about lunch."},
	{Scope: scope.Project, Type: memory.Semantic, Key: "kitchen", Body: "Bananas are in the kitchen."},
	{Scope: scope.Tenant, Type: memory.Semantic, Key: "release-days", Body: "No releases on Fridays; deploy early in the week."},
}

// Queries are the searches ranking is compared on.
var Queries = []string{"deploy", "deploy pipeline", "postgresql migrations", "release", "kitchen bananas", "tabs go", "rollback tag"}

// SearchResults puts Corpus into s (in project projA) and returns, for
// each of Queries, the keys and scores of the hits in order.
func SearchResults(t testing.TB, s *memory.Store) []string {
	t.Helper()
	for _, w := range Corpus {
		put(t, s, projA, w)
	}
	var out []string
	for _, q := range Queries {
		hits, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: q})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s:", q)
		for _, h := range hits {
			fmt.Fprintf(&b, " %s/%s=%.6f", h.Record.Type, h.Record.Key, h.Score)
		}
		out = append(out, b.String())
	}
	return out
}

func testSearch(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	res := SearchResults(t, s)
	if !strings.HasPrefix(res[0], "deploy: ") || !strings.Contains(res[0], "deploy-process") {
		t.Fatalf("search deploy = %s", res[0])
	}
	if !strings.Contains(res[4], "kitchen") || strings.Contains(res[4], "deploy") {
		t.Fatalf("search kitchen = %s", res[4])
	}
	hits, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: "deploy", Types: []memory.Type{memory.Procedural}})
	if err != nil || len(hits) != 1 || hits[0].Record.Key != "rollback" {
		t.Fatalf("search procedures = %+v, %v", hits, err)
	}
	if hits, err := s.Search(ctx, projB.ID, memory.SearchOptions{Query: "bananas"}); err != nil || len(hits) != 0 {
		t.Fatalf("B finds A's records: %+v, %v", hits, err)
	}
	if hits, err := s.Search(ctx, projB.ID, memory.SearchOptions{Query: "tabs"}); err != nil || len(hits) != 1 {
		t.Fatalf("B does not find the workspace record: %+v, %v", hits, err)
	}
	// A delete leaves the index at once.
	if _, err := s.Delete(ctx, projA, memory.Selector{Key: "kitchen"}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: "bananas"}); err != nil || len(hits) != 0 {
		t.Fatalf("deleted record found: %+v, %v", hits, err)
	}
}

func testExpiry(t *testing.T, newDB NewDB) {
	c := NewClock()
	target := newDB(t)
	s := Open(t, target, c)
	hour := time.Hour
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Episodic, Key: "short", Body: "gone soon", TTL: &hour})
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Episodic, Key: "long", Body: "stays"})
	if _, err := s.Get(ctx, projA.ID, memory.Selector{Key: "short"}); err != nil {
		t.Fatal(err)
	}
	c.Add(2 * time.Hour)
	if _, err := s.Get(ctx, projA.ID, memory.Selector{Key: "short"}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("expired record read: %v", err)
	}
	if hits, _ := s.Search(ctx, projA.ID, memory.SearchOptions{Query: "gone soon"}); len(hits) != 0 {
		t.Fatalf("expired record found: %+v", hits)
	}
	n, err := s.Purge(ctx)
	if err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1", n, err)
	}
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v", n, err)
	}
	if got, err := s.Get(ctx, projA.ID, memory.Selector{Key: "long"}); err != nil || got.Body != "stays" {
		t.Fatalf("long = %+v, %v", got, err)
	}
}

func testCapture(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	c1 := memory.Capture{SessionID: "s1", Plan: "fix", Statements: []string{"Always run make lint."},
		Sequences: []memory.Sequence{{Steps: []string{"make build", "make test"}, Succeeded: true}}}
	res, err := s.Capture(ctx, projA, c1, 2)
	if err != nil || len(res.Pending) != 1 || len(res.Promoted) != 0 || len(res.Procedures) != 1 {
		t.Fatalf("first capture = %+v, %v", res, err)
	}
	again, err := s.Capture(ctx, projA, c1, 2)
	if err != nil || !again.Replaced || len(again.Pending) != 1 || again.Procedures[0].UseCount != 1 {
		t.Fatalf("same session again = %+v, %v", again, err)
	}
	res, err = s.Capture(ctx, projA, memory.Capture{SessionID: "s2", Statements: []string{"always run make lint"},
		Sequences: []memory.Sequence{{Steps: []string{"make build", "make test"}, Succeeded: true}}}, 2)
	if err != nil || len(res.Promoted) != 1 || res.Procedures[0].UseCount != 2 {
		t.Fatalf("second session = %+v, %v", res, err)
	}
	if res.Promoted[0].Body != "Always run make lint." {
		t.Errorf("promoted body = %q, want the first session's wording", res.Promoted[0].Body)
	}
	if n, err := s.Count(ctx, projA.ID, memory.Semantic); err != nil || n != 1 {
		t.Fatalf("facts = %d, %v", n, err)
	}
	if _, err := s.Capture(ctx, projB, memory.Capture{SessionID: "s3", Statements: []string{"always run make lint"}}, 2); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Count(ctx, projB.ID, memory.Semantic); n != 0 {
		t.Fatalf("another project's session promoted B's statement: %d facts", n)
	}
}

// secretText is a credential the scanner refuses (a Stripe live key),
// spelled in two parts so no scanner takes this file for a leak.
const secretText = "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc"

func testSecrets(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	_, _, err := s.Put(ctx, projA, fact("aws", "the key is "+secretText))
	if !errors.Is(err, memory.ErrSecretRejected) {
		t.Fatalf("put of a secret = %v", err)
	}
	if strings.Contains(err.Error(), secretText) {
		t.Fatalf("error carries the secret: %v", err)
	}
	put(t, s, projA, fact("aws", "keys live in the vault"))
	leak := "STRIPE_KEY=" + secretText
	if _, err := s.Update(ctx, projA, memory.Selector{Key: "aws"}, memory.Patch{Body: &leak}); !errors.Is(err, memory.ErrSecretRejected) {
		t.Fatalf("update to a secret = %v", err)
	}
	res, err := s.Capture(ctx, projA, memory.Capture{SessionID: "s1", Statements: []string{"use " + secretText + " for s3"}}, 1)
	if err == nil && len(res.Refused) == 0 {
		t.Fatalf("capture of a secret = %+v", res)
	}
	var found []string
	err = s.Export(ctx, projA.ID, true, func(project string, r memory.Record) error {
		if strings.Contains(r.Body+r.Description+r.Key+strings.Join(r.Tags, ""), "4eC39HqLyjWDarjtT1zdp7dc") {
			found = append(found, r.Key)
		}
		return nil
	})
	if err != nil || len(found) != 0 {
		t.Fatalf("secret stored in %v (%v)", found, err)
	}
	hits, _ := s.Search(ctx, projA.ID, memory.SearchOptions{Query: secretText, Bodies: true})
	for _, h := range hits {
		if strings.Contains(h.Record.Body+h.Preview, "4eC39HqLyjWDarjtT1zdp7dc") {
			t.Fatalf("search finds the secret: %+v", h)
		}
	}
}

func testTokens(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	secret, tok, err := token.Of(s).Create(ctx, token.Spec{Name: "laptop", Tenant: "acme", User: "ann", Profile: "default", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := token.Of(s).Authenticate(ctx, secret)
	if err != nil || got.ID != tok.ID || got.User != "ann" || got.Tenant != "acme" || !got.Admin {
		t.Fatalf("authenticate = %+v, %v", got, err)
	}
	_, tok2, err := token.Of(s).Create(ctx, token.Spec{Tenant: "acme", User: "bob", Profile: "default"})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := token.Of(s).List(ctx)
	if err != nil || len(ts) != 2 {
		t.Fatalf("tokens = %+v, %v", ts, err)
	}
	for _, x := range ts {
		if x.ID != tok.ID && x.ID != tok2.ID || x.Admin != (x.ID == tok.ID) {
			t.Fatalf("tokens = %+v", ts)
		}
	}
	if _, err := token.Of(s).Authenticate(ctx, secret+"x"); err == nil {
		t.Fatal("a wrong token authenticated")
	}
	if r, err := token.Of(s).Revoke(ctx, tok.ID); err != nil || r.ID != tok.ID {
		t.Fatalf("revoke = %+v, %v", r, err)
	}
	if _, err := token.Of(s).Authenticate(ctx, secret); err == nil {
		t.Fatal("a revoked token authenticated")
	}
	if _, err := token.Of(s).Revoke(ctx, tok.ID); err == nil {
		t.Fatal("revoked twice")
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// toyEmbedder is a client, for model "toy", of a loopback embeddings
// server that lives as long as t.
func toyEmbedder(t *testing.T) *embed.Client {
	t.Helper()
	srv, err := embedtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := embed.New(embed.Config{URL: srv.URL, Model: "toy", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testEmbeddings(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	vx := semantic.New(s)
	c := toyEmbedder(t)
	put(t, s, projA, fact("shipping-howto", "To ship a release, tag it and run the pipeline."))
	put(t, s, projA, fact("pets", "The kitten sleeps on the sofa."))
	put(t, s, projA, fact("lunch", "Bananas and apples are in the kitchen."))
	if n, err := vx.EmbedQueued(ctx, "toy"); err != nil || n != 3 {
		t.Fatalf("queued = %d, %v", n, err)
	}
	total := 0
	for range 10 {
		r, err := vx.EmbedPending(ctx, "toy", c, 16)
		if err != nil {
			t.Fatal(err)
		}
		total += r.Embedded
		if r == (semantic.EmbedResult{}) {
			break
		}
	}
	if total != 3 {
		t.Fatalf("embedded %d, want 3", total)
	}
	st, err := vx.EmbedStatus(ctx, "toy")
	if err != nil || st.Vectors != 3 || st.Dims != embedtest.Dims {
		t.Fatalf("status = %+v, %v", st, err)
	}
	q, err := c.Embed(ctx, []string{"a kitten on a sofa"})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := vx.SemanticSearch(ctx, projA.ID, memory.SearchOptions{Query: "a kitten on a sofa"}, "toy", q[0])
	if err != nil || len(hits) == 0 || hits[0].Record.Key != "pets" {
		t.Fatalf("semantic search = %+v, %v", hits, err)
	}
	hits, err = vx.HybridSearch(ctx, projA.ID, memory.SearchOptions{Query: "kitten sofa"}, "toy", q[0])
	if err != nil || len(hits) == 0 || hits[0].Record.Key != "pets" {
		t.Fatalf("hybrid search = %+v, %v", hits, err)
	}
	// A change queues the record again and drops its vector.
	body := "The puppy sleeps in the garden."
	if _, err := s.Update(ctx, projA, memory.Selector{Key: "pets"}, memory.Patch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	if n, err := vx.EmbedQueued(ctx, "toy"); err != nil || n != 1 {
		t.Fatalf("queued after update = %d, %v", n, err)
	}
	if ok, err := vx.LeaseEmbedding(ctx, "me", time.Minute); err != nil || !ok {
		t.Fatalf("lease = %v, %v", ok, err)
	}
	if ok, err := vx.LeaseEmbedding(ctx, "other", time.Minute); err != nil || ok {
		t.Fatalf("second holder leased: %v, %v", ok, err)
	}
	if err := vx.ReleaseEmbedding(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	if ok, err := vx.LeaseEmbedding(ctx, "other", time.Minute); err != nil || !ok {
		t.Fatalf("lease after release = %v, %v", ok, err)
	}
	if changed, err := vx.NoteDims(ctx, "toy", embedtest.Dims); err != nil || changed {
		t.Fatalf("note same dims = %v, %v", changed, err)
	}
}

func testCounts(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	for i := range 5 {
		put(t, s, projA, fact(fmt.Sprintf("f%d", i), "fact"))
	}
	put(t, s, projA, memory.Write{Scope: scope.Workspace, Type: memory.Semantic, Key: "f0", Body: "shadowed"})
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Procedural, Key: "p", Body: "1. x"})
	if n, err := s.Count(ctx, projA.ID, memory.Semantic); err != nil || n != 5 {
		t.Fatalf("count = %d, %v; want 5", n, err)
	}
	if n, err := s.CountAll(ctx, projA.ID); err != nil || n != 6 {
		t.Fatalf("count all = %d, %v; want 6", n, err)
	}
	if n, err := s.Count(ctx, projB.ID, memory.Semantic); err != nil || n != 1 {
		t.Fatalf("count B = %d, %v; want 1", n, err)
	}
	r, _ := s.Get(ctx, projA.ID, memory.Selector{Key: "f1"})
	if err := s.Touch(ctx, []string{r.ID, r.ID}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Peek(ctx, projA.ID, memory.Selector{Key: "f1"})
	if got.UseCount != r.UseCount+2 || got.LastAccessedAt == nil {
		t.Fatalf("uses = %d (last %v), want %d", got.UseCount, got.LastAccessedAt, r.UseCount+2)
	}
	// Uses of several records reach the database together, each its own,
	// and uses of a record that is gone change nothing.
	before := map[string]memory.Record{}
	var ids []string
	for i := 2; i < 5; i++ {
		k := fmt.Sprintf("f%d", i)
		rec, _ := s.Peek(ctx, projA.ID, memory.Selector{Key: k})
		before[k] = rec
		for range i {
			ids = append(ids, rec.ID)
		}
	}
	if err := s.Touch(ctx, append(ids, "no-such-record")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 5; i++ {
		k := fmt.Sprintf("f%d", i)
		got, _ := s.Peek(ctx, projA.ID, memory.Selector{Key: k})
		if got.UseCount != before[k].UseCount+int64(i) || got.LastAccessedAt == nil {
			t.Fatalf("%s: uses = %d (last %v), want %d", k, got.UseCount, got.LastAccessedAt, before[k].UseCount+int64(i))
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Records != 7 {
		t.Fatalf("stats = %+v, %v", st, err)
	}
}

// testUsesAddUp: two stores on one database (two processes, or two
// replicas) count uses of the same records and flush them at once; every
// use is stored, each record's its own.
func testUsesAddUp(t *testing.T, newDB NewDB) {
	target := newDB(t)
	a, b := Open(t, target, NewClock()), Open(t, target, NewClock())
	var ids []string
	for i := range 3 {
		ids = append(ids, put(t, a, projA, fact(fmt.Sprintf("u%d", i), "fact")).ID)
	}
	var wg sync.WaitGroup
	for _, s := range []*memory.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				// u0 once a round, u1 twice, u2 three times.
				if err := s.Touch(ctx, []string{ids[0], ids[1], ids[1], ids[2], ids[2], ids[2]}); err != nil {
					t.Error(err)
				}
				if round%5 == 4 {
					if err := s.Flush(ctx); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range 3 {
		got, err := a.Peek(ctx, projA.ID, memory.Selector{Key: fmt.Sprintf("u%d", i)})
		if want := int64(2 * 20 * (i + 1)); err != nil || got.UseCount != want {
			t.Errorf("u%d: uses = %d, %v; want %d", i, got.UseCount, err, want)
		}
	}
}

func testMirrorState(t *testing.T, newDB NewDB) {
	target := newDB(t)
	s := Open(t, target, NewClock())
	other := Open(t, target, NewClock())
	p := projA.ID
	v0, err := s.MirrorVersion(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.FileState{Stem: "deploy", Size: 10, MTime: 100, Hash: "h1", ID: "01ID"}
	if err := s.Touched(ctx, p, st, nil, nil); err != nil {
		t.Fatal(err)
	}
	v1, _ := other.MirrorVersion(ctx, p)
	if v1 <= v0 {
		t.Fatalf("version %d after a change, was %d", v1, v0)
	}
	all, err := other.MirrorState(ctx, p)
	if err != nil || all["deploy"].Hash != "h1" {
		t.Fatalf("state = %+v, %v", all, err)
	}
	st2 := st
	st2.MTime, st2.Size = 200, 11
	if err := other.Touched(ctx, p, st2, &st, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := s.MirrorChangesSince(ctx, p, v1)
	if err != nil || ch.Version <= v1 || len(ch.Changed) != 1 || ch.Changed["deploy"].MTime != 200 || len(ch.Gone) != 0 {
		t.Fatalf("changes since %d = %+v, %v", v1, ch, err)
	}
	if _, _, err := s.Forget(ctx, p, "deploy", &st2, nil); err != nil {
		t.Fatal(err)
	}
	ch2, err := other.MirrorChangesSince(ctx, p, ch.Version)
	if err != nil || len(ch2.Gone) != 1 || ch2.Gone[0] != "deploy" || len(ch2.Changed) != 0 {
		t.Fatalf("changes after forget = %+v, %v", ch2, err)
	}
	if all, _ := s.MirrorState(ctx, p); len(all) != 0 {
		t.Fatalf("state after forget = %+v", all)
	}
	if v, _ := s.MirrorVersion(ctx, projB.ID); v != 0 {
		t.Fatalf("B's version = %d", v)
	}
}

func testCache(t *testing.T, newDB NewDB) {
	target := newDB(t)
	s := Open(t, target, NewClock())
	other := Open(t, target, NewClock())
	put(t, s, projA, fact("a", "x"))
	if err := s.SetCached(ctx, projA.ID, "instructions", "derived text"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := other.Cached(ctx, projA.ID, "instructions"); err != nil || !ok || v != "derived text" {
		t.Fatalf("cached = %q %v %v", v, ok, err)
	}
	if _, err := other.Delete(ctx, projA, memory.Selector{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Cached(ctx, projA.ID, "instructions"); err != nil || ok {
		t.Fatalf("cached text outlived a deletion in another store: %v %v", ok, err)
	}
	// Names differing in case, or in a LIKE wildcard, are names apart:
	// saving one keeps the others.
	names := []string{"Summary", "summary", "sum_ary", "summary%"}
	for _, n := range names {
		if err := s.SetCached(ctx, projA.ID, n, "text of "+n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if v, ok, err := other.Cached(ctx, projA.ID, n); err != nil || !ok || v != "text of "+n {
			t.Errorf("cached %s = %q %v %v", n, v, ok, err)
		}
	}
}

func testMoveProject(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	put(t, s, projA, fact("one", "first"))
	put(t, s, projA, fact("two", "second"))
	if _, err := s.Capture(ctx, projA, memory.Capture{SessionID: "s1", Statements: []string{"Prefer small PRs."}}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Capture(ctx, projB, memory.Capture{SessionID: "s2", Statements: []string{"Prefer small PRs."}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteRoot(ctx, projA.ID, "/work/a"); err != nil {
		t.Fatal(err)
	}
	n, err := s.MoveProject(ctx, projA.ID, projB.ID, "/work/b")
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("moved %d", n)
	}
	if got, err := s.Get(ctx, projB.ID, memory.Selector{Key: "one"}); err != nil || got.Body != "first" {
		t.Fatalf("B one = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, projA.ID, memory.Selector{Key: "one"}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("A still has one: %v", err)
	}
	ps, err := s.Projects(ctx)
	if err != nil || len(ps) == 0 {
		t.Fatalf("projects = %+v, %v", ps, err)
	}
}

func testTwoStores(t *testing.T, newDB NewDB) {
	target := newDB(t)
	a := Open(t, target, nil)
	b := Open(t, target, nil)
	// Warm b's caches first, so that what follows tests catching up.
	if _, err := b.Search(ctx, projA.ID, memory.SearchOptions{Query: "anything"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Count(ctx, projA.ID, memory.Semantic); n != 0 {
		t.Fatalf("count = %d", n)
	}
	for i := range 20 {
		w, r := a, b
		if i%2 == 1 {
			w, r = b, a
		}
		key := fmt.Sprintf("shared-%d", i)
		word := fmt.Sprintf("zebra%dquokka", i)
		put(t, w, projA, fact(key, "written by one store: "+word))
		got, err := r.Get(ctx, projA.ID, memory.Selector{Key: key})
		if err != nil || !strings.Contains(got.Body, word) {
			t.Fatalf("other store reads %s = %+v, %v", key, got, err)
		}
		hits, err := r.Search(ctx, projA.ID, memory.SearchOptions{Query: word})
		if err != nil || len(hits) != 1 || hits[0].Record.Key != key {
			t.Fatalf("other store searches %s = %+v, %v", word, hits, err)
		}
		if n, err := r.Count(ctx, projA.ID, memory.Semantic); err != nil || n != i+1 {
			t.Fatalf("other store counts %d, %v; want %d", n, err, i+1)
		}
	}
	if _, err := a.Delete(ctx, projA, memory.Selector{Key: "shared-3"}); err != nil {
		t.Fatal(err)
	}
	if hits, err := b.Search(ctx, projA.ID, memory.SearchOptions{Query: "zebra3quokka"}); err != nil || len(hits) != 0 {
		t.Fatalf("other store finds a deleted record: %+v, %v", hits, err)
	}
	if _, err := b.Get(ctx, projA.ID, memory.Selector{Key: "shared-3"}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("other store reads a deleted record: %v", err)
	}
}

func testConcurrentWriters(t *testing.T, newDB NewDB) {
	target := newDB(t)
	const stores, each = 3, 15
	ss := make([]*memory.Store, stores)
	for i := range ss {
		ss[i] = Open(t, target, nil)
	}
	var wg sync.WaitGroup
	errs := make(chan error, stores*each*2)
	for i, s := range ss {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range each {
					key := fmt.Sprintf("w%d-%d-%d", i, g, j)
					if _, _, err := s.Put(ctx, projA, fact(key, "concurrent write "+key)); err != nil {
						errs <- fmt.Errorf("put %s: %w", key, err)
						return
					}
					if _, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: "concurrent"}); err != nil {
						errs <- fmt.Errorf("search: %w", err)
						return
					}
				}
				// Everyone updates one shared record too.
				body := fmt.Sprintf("last written by %d-%d", i, g)
				if _, _, err := s.Put(ctx, projA, fact("shared", body)); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, s := range ss {
		if n, err := s.Count(ctx, projA.ID, memory.Semantic); err != nil || n != stores*2*each+1 {
			t.Fatalf("count = %d, %v; want %d", n, err, stores*2*each+1)
		}
		hits, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: "w2-1-14"})
		if err != nil || len(hits) == 0 || hits[0].Record.Key != "w2-1-14" {
			t.Fatalf("search of the last write = %+v, %v", hits, err)
		}
	}
}

func testConcurrentMigration(t *testing.T, newDB NewDB) {
	target := newDB(t)
	const n = 4
	var wg sync.WaitGroup
	stores := make([]*memory.Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = OpenTarget(ctx, target, nil)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	put(t, stores[0], projA, fact("after-migration", "works"))
	for i, s := range stores {
		if got, err := s.Get(ctx, projA.ID, memory.Selector{Key: "after-migration"}); err != nil || got.Body != "works" {
			t.Fatalf("store %d: %+v, %v", i, got, err)
		}
	}
}

// NUL bytes and invalid UTF-8, which SQLite would store and PostgreSQL
// cannot: every backend refuses them as input, or finds nothing for them,
// alike; none answers with the server's encoding error.
func testUnstorableBytes(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	invalid := func(what string, err error) {
		t.Helper()
		var me *memory.Error
		if !errors.As(err, &me) || me.Code != memory.CodeInvalidArgument {
			t.Errorf("%s = %v, want invalid_argument", what, err)
		}
	}
	w := fact("nul-description", "body")
	w.Description = "one\x00two"
	_, _, err := s.Put(ctx, projA, w)
	invalid("put with a NUL in the description", err)
	for _, sid := range []string{"s\x00", "s\xff", "line\nbreak"} {
		w := fact("odd-session", "body")
		w.SessionID = sid
		_, _, err := s.Put(ctx, projA, w)
		invalid(fmt.Sprintf("put with session id %q", sid), err)
	}
	// A NUL in a tag, stored, would break every listing by tag on
	// PostgreSQL, whose JSON refuses \u0000.
	w = fact("nul-tag", "body")
	w.Tags = []string{"ok", "bad\x00tag"}
	_, _, err = s.Put(ctx, projA, w)
	invalid("put with a NUL in a tag", err)
	for _, name := range []string{"ci\xff", "ci\x00", "ci\tbot"} {
		_, _, err := token.Of(s).Create(ctx, token.Spec{Tenant: "acme", User: "ann", Name: name})
		invalid(fmt.Sprintf("token named %q", name), err)
	}
	r := put(t, s, projA, fact("kept", "body"))
	w = fact("tagged", "body")
	w.Tags = []string{"ok"}
	put(t, s, projA, w)
	if got, _, err := s.List(ctx, projA.ID, memory.ListOptions{Tag: "ok"}); err != nil || len(got) != 1 || got[0].Key != "tagged" {
		t.Errorf("list by tag = %+v, %v", got, err)
	}
	for _, tag := range []string{"ok\x00", "\xff"} {
		if got, next, err := s.List(ctx, projA.ID, memory.ListOptions{Tag: tag}); err != nil || len(got) != 0 || next != "" {
			t.Errorf("list by tag %q = %+v %q, %v", tag, got, next, err)
		}
	}
	bad := base64.RawURLEncoding.EncodeToString([]byte("k\xff\x00semantic"))
	_, _, err = s.List(ctx, projA.ID, memory.ListOptions{Cursor: bad})
	invalid("list from a cursor holding invalid UTF-8", err)
	d := "one\x00two"
	_, err = s.Update(ctx, projA, memory.Selector{Key: "kept"}, memory.Patch{Description: &d})
	invalid("update with a NUL in the description", err)
	if got, err := s.Get(ctx, projA.ID, memory.Selector{Key: "kept"}); err != nil || got.Description != "" || got.ID != r.ID {
		t.Errorf("after the refused update = %+v, %v", got, err)
	}
	for _, id := range []string{r.ID + "\x00", "\xff" + r.ID} {
		if _, err := s.Get(ctx, projA.ID, memory.Selector{ID: id}); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("get by id %q = %v, want not found", id, err)
		}
		if _, err := token.Of(s).Revoke(ctx, id); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("revoke %q = %v, want not found", id, err)
		}
	}
}

// The calls the tests above leave out, each at least once, with what they
// return: every statement of the store runs on every backend.
func testRestOfTheStore(t *testing.T, newDB NewDB) {
	clock := NewClock()
	s := Open(t, newDB(t), clock)
	vx := semantic.New(s)
	c := toyEmbedder(t)
	put(t, s, projA, fact("alpha", "The first fact."))
	put(t, s, projA, fact("beta", "The second fact."))
	if _, err := vx.EmbedPending(ctx, "toy", c, 16); err != nil {
		t.Fatal(err)
	}
	if err := vx.WarmVectors(ctx, "toy"); err != nil {
		t.Fatal(err)
	}
	if n, err := vx.EmbedWaiting(ctx, projA.ID, "toy"); err != nil || n != 0 {
		t.Fatalf("waiting = %d, %v", n, err)
	}
	if n, err := vx.QueueOthersEmbedded(ctx, "other"); err != nil || n != 2 {
		t.Fatalf("queue others embedded = %d, %v", n, err)
	}
	if n, err := vx.QueueMissing(ctx, "other"); err != nil || n != 2 {
		t.Fatalf("queue missing = %d, %v", n, err)
	}
	if n, err := vx.EmbedWaiting(ctx, projA.ID, "other"); err != nil || n != 2 {
		t.Fatalf("waiting for other = %d, %v", n, err)
	}
	if n, err := vx.PruneVectors(ctx, "other"); err != nil || n != 2 {
		t.Fatalf("prune = %d, %v", n, err)
	}

	idx, err := s.Index(ctx, projA.ID, 10)
	if err != nil || len(idx) != 2 || idx[0].Key != "alpha" || idx[1].Key != "beta" {
		t.Fatalf("index = %+v, %v", idx, err)
	}
	stamp, err := s.CacheStamp(ctx, projA.ID)
	if err != nil || stamp == 0 {
		t.Fatalf("stamp = %d, %v", stamp, err)
	}
	if err := s.SetCachedAt(ctx, projA.ID, "summary", "two facts", stamp); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Cached(ctx, projA.ID, "summary"); err != nil || !ok || v != "two facts" {
		t.Fatalf("cached = %q %v %v", v, ok, err)
	}
	put(t, s, projA, fact("gamma", "The third fact."))
	if _, ok, _ := s.Cached(ctx, projA.ID, "summary"); ok {
		t.Fatal("cache kept past a write")
	}

	old := put(t, s, projA, fact("restored", "From an export."))
	old.Body, old.UseCount = "From an export, again.", 7
	if _, err := s.Delete(ctx, projA, memory.Selector{Key: "restored"}); err != nil {
		t.Fatal(err)
	}
	r, created, err := s.Restore(ctx, projA, old)
	if err != nil || !created || r.UseCount != 7 || r.Body != old.Body {
		t.Fatalf("restore = %+v, %v, %v", r, created, err)
	}

	p := projB.ID
	imp, err := s.Import(ctx, p, memory.Record{Type: memory.Semantic, Key: "from-file", Body: "Written by hand.", Confidence: 0.9, CreatedAt: clock.Now()},
		memory.FileState{Stem: "from-file", Size: 16, MTime: 1, Hash: "h"}, nil, nil)
	if err != nil || imp.ID == "" || imp.Confidence != 0.9 {
		t.Fatalf("import = %+v, %v", imp, err)
	}
	if m, err := s.Mirrored(ctx, p); err != nil || len(m) != 1 || m[0].ID != imp.ID {
		t.Fatalf("mirrored = %+v, %v", m, err)
	}
	if n, err := s.ReleaseMissingFiles(ctx, p, func(stem string) bool { return stem == "from-file" }); err != nil || n != 1 {
		t.Fatalf("released = %d, %v", n, err)
	}
	if st, err := s.MirrorState(ctx, p); err != nil || len(st) != 0 {
		t.Fatalf("state after release = %+v, %v", st, err)
	}
	ttl := time.Hour
	w := fact("short-lived", "Gone soon.")
	w.TTL = &ttl
	put(t, s, projB, w)
	clock.Add(2 * time.Hour)
	if n, err := s.PurgeMirrored(ctx, projB); err != nil || n != 1 {
		t.Fatalf("purge mirrored = %d, %v", n, err)
	}
}

// Replicas capture at once: the same session through several stores
// confirms a statement once and repeats a procedure once; distinct
// sessions each count, so the statement is promoted exactly once.
func testConcurrentCaptures(t *testing.T, newDB NewDB) {
	target := newDB(t)
	ss := []*memory.Store{Open(t, target, nil), Open(t, target, nil), Open(t, target, nil)}
	capture := func(sid string) memory.Capture {
		return memory.Capture{SessionID: sid, Statements: []string{"Deploys go out on Tuesdays."},
			Sequences: []memory.Sequence{{Steps: []string{"make release", "make deploy"}, Succeeded: true}}}
	}
	run := func(sids ...string) {
		var wg sync.WaitGroup
		errs := make(chan error, len(ss)*len(sids))
		for _, s := range ss {
			for _, sid := range sids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Capture(ctx, projA, capture(sid), 3); err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run("one")
	s := ss[0]
	if n, _ := s.Count(ctx, projA.ID, memory.Semantic); n != 0 {
		t.Fatalf("one session, captured by every store, promoted the statement: %d facts", n)
	}
	if n, _ := s.Count(ctx, projA.ID, memory.Episodic); n != 1 {
		t.Fatalf("episodes of one session = %d, want 1", n)
	}
	run("two", "three")
	if n, _ := s.Count(ctx, projA.ID, memory.Semantic); n != 1 {
		t.Fatalf("facts after three sessions = %d, want 1", n)
	}
	procs, err := s.Effective(ctx, projA.ID, []memory.Type{memory.Procedural}, 0)
	if err != nil || len(procs) != 1 || procs[0].UseCount != 3 {
		t.Fatalf("procedures = %+v, %v; want one used 3 times", procs, err)
	}
}

// A statement as long as a fact may be, in words no compression shortens,
// is confirmed by a second session and promoted, and a session repeating
// it counts once.
func testLongStatement(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	var words []string
	for i := range 2000 {
		words = append(words, fmt.Sprintf("w%x", uint64(i)*0x9e3779b97f4a7c15))
	}
	long := strings.Join(words, " ") + "."
	for _, sid := range []string{"s1", "s1", "s2"} {
		res, err := s.Capture(ctx, projA, memory.Capture{SessionID: sid, Statements: []string{long}}, 2)
		if err != nil || len(res.Refused) != 0 {
			t.Fatalf("capture %s of a %d-byte statement = %+v, %v", sid, len(long), res.Refused, err)
		}
		if sid == "s1" && (len(res.Pending) != 1 || res.Pending[0].Confirmations != 1) {
			t.Fatalf("after %s: pending %+v", sid, res.Pending)
		}
		if sid == "s2" && (len(res.Promoted) != 1 || res.Promoted[0].Body != long) {
			t.Fatalf("after %s: promoted %d", sid, len(res.Promoted))
		}
	}
}

// One store purges what expired; another, which counted and indexed the
// record while it lived, no longer counts, finds or reads it.
func testExpiryAcrossStores(t *testing.T, newDB NewDB) {
	target := newDB(t)
	ca, cb := NewClock(), NewClock()
	a, b := Open(t, target, ca), Open(t, target, cb)
	hour := time.Hour
	put(t, a, projA, memory.Write{Scope: scope.Project, Type: memory.Episodic, Key: "brief", Body: "ephemeral walrus", TTL: &hour})
	put(t, a, projA, memory.Write{Scope: scope.Project, Type: memory.Episodic, Key: "lasting", Body: "durable walrus"})
	if n, err := b.Count(ctx, projA.ID, memory.Episodic); err != nil || n != 2 {
		t.Fatalf("b counts %d, %v", n, err)
	}
	if hits, err := b.Search(ctx, projA.ID, memory.SearchOptions{Query: "walrus"}); err != nil || len(hits) != 2 {
		t.Fatalf("b finds %d, %v", len(hits), err)
	}
	ca.Add(2 * time.Hour)
	if n, err := a.Purge(ctx); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	// b's clock has not reached the expiry: the record is gone all the same.
	if n, err := b.Count(ctx, projA.ID, memory.Episodic); err != nil || n != 1 {
		t.Errorf("b counts %d after the purge, %v", n, err)
	}
	if hits, err := b.Search(ctx, projA.ID, memory.SearchOptions{Query: "walrus"}); err != nil || len(hits) != 1 || hits[0].Record.Key != "lasting" {
		t.Errorf("b finds %+v after the purge, %v", hits, err)
	}
	if _, err := b.Get(ctx, projA.ID, memory.Selector{Key: "brief"}); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("b reads the purged record: %v", err)
	}
}

// A token revoked through one store while others authenticate with it:
// each check answers the token or not found, never an error, and none
// begun after the revocation returned lets the token in.
func testRevokeWhileAuthenticating(t *testing.T, newDB NewDB) {
	target := newDB(t)
	clock := NewClock()
	admin := Open(t, target, clock)
	secret, tok, err := token.Of(admin).Create(ctx, token.Spec{Tenant: "acme", User: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	const stores = 3
	var revoked sync.WaitGroup
	revoked.Add(stores)
	var done bool
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range stores {
		s := Open(t, target, clock)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				mu.Lock()
				after := done
				mu.Unlock()
				clock.Add(time.Minute) // every check notes the use: a write
				_, err := token.Of(s).Authenticate(ctx, secret)
				switch {
				case err == nil && after:
					t.Error("a token authenticated after its revocation")
				case err != nil && !errors.Is(err, memory.ErrNotFound):
					t.Errorf("authenticate: %v", err)
				case err != nil && i < 3:
					t.Errorf("authenticate before the revocation: %v", err)
				}
				if after || err != nil && i < 3 {
					if i < 3 {
						revoked.Done()
					}
					return
				}
				if i == 3 {
					revoked.Done() // each has let the token in a few times
				}
			}
		}()
	}
	revoked.Wait()
	if _, err := token.Of(admin).Revoke(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	done = true
	mu.Unlock()
	wg.Wait()
}

// testLongBodyPreviews: a hit's preview is taken around the first match
// wherever it lies in a long body, the body read in part or whole.
func testLongBodyPreviews(t *testing.T, newDB NewDB) {
	s := Open(t, newDB(t), NewClock())
	pad := strings.Repeat("filler words that match nothing at all. ", 60) // 2,400 bytes
	for _, tc := range []struct{ key, body, query, want string }{
		{"early", "The walrus sleeps on the ice. " + pad, "walrus", "The walrus sleeps"},
		{"late", pad + "The narwhal sleeps under the ice. " + pad, "narwhal", "...words that match nothing at all. The narwhal sleeps under the ice. filler"},
		{"last", pad + "ends with the manatee", "manatee", "...match nothing at all. ends with the manatee"},
		{"blank-start", strings.Repeat(" ", 1500) + "\n\tthe dugong swims", "dugong", "the dugong swims"},
		{"unicode", strings.Repeat("Prüfung ohne Treffer. ", 60) + "Die ÜBERFAHRT beginnt.", "überfahrt", "...Treffer. Prüfung ohne Treffer. Die ÜBERFAHRT beginnt."},
		{"straddle", pad[:760] + "hippopotamus " + pad, "hippopotamus", "hippopotamus filler words"},
	} {
		put(t, s, projA, fact(tc.key, tc.body))
		for round := range 2 { // the second time from what the first kept
			hits, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: tc.query})
			if err != nil || len(hits) != 1 || hits[0].Record.Key != tc.key {
				t.Fatalf("search %q (round %d) = %+v, %v", tc.query, round, hits, err)
			}
			if p := hits[0].Preview; !strings.Contains(p, tc.want) || len(p) > 170 || hits[0].Record.Body != "" {
				t.Errorf("preview of %s (round %d) = %q, want it to hold %q", tc.key, round, p, tc.want)
			}
			full, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: tc.query, Bodies: true})
			if err != nil || len(full) != 1 || strings.TrimSpace(full[0].Record.Body) != strings.TrimSpace(tc.body) || full[0].Preview != hits[0].Preview {
				t.Fatalf("search %q with bodies = %+v, %v; preview without %q", tc.query, full, err, hits[0].Preview)
			}
		}
	}
}

// testHitsAcrossStores: a search shows a record found before as it is
// after another store on the same database changed it, moved it, let it
// expire or deleted it.
func testHitsAcrossStores(t *testing.T, newDB NewDB) {
	target := newDB(t)
	clock := NewClock()
	a, b := Open(t, target, clock), Open(t, target, clock)
	search := func(q string) []memory.Hit {
		t.Helper()
		hits, err := b.Search(ctx, projA.ID, memory.SearchOptions{Query: q})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		return hits
	}
	w := fact("otter", "The otter eats clams. "+strings.Repeat("More about rivers. ", 50))
	w.Description = "first description"
	put(t, a, projA, w)
	for range 2 {
		if hits := search("otter clams"); len(hits) != 1 || hits[0].Record.Description != "first description" || !strings.Contains(hits[0].Preview, "otter eats clams") {
			t.Fatalf("hits = %+v", hits)
		}
	}
	w.Description = "second description"
	w.Body = strings.Repeat("More about rivers. ", 50) + "Now the otter eats clams and mussels."
	put(t, a, projA, w)
	hits := search("otter clams")
	if len(hits) != 1 || hits[0].Record.Description != "second description" || !strings.Contains(hits[0].Preview, "otter eats clams and mussels") {
		t.Fatalf("after an update elsewhere, hits = %+v", hits)
	}
	w.Key = "sea-otter"
	put(t, a, projA, w)
	if _, err := a.Delete(ctx, projA, memory.Selector{Key: "otter"}); err != nil {
		t.Fatal(err)
	}
	if hits := search("otter clams"); len(hits) != 1 || hits[0].Record.Key != "sea-otter" {
		t.Fatalf("after a delete and a new record elsewhere, hits = %+v", hits)
	}
	ttl := time.Hour
	w.TTL = &ttl
	put(t, a, projA, w)
	search("otter clams")
	clock.Add(2 * time.Hour)
	if hits := search("otter clams"); len(hits) != 0 {
		t.Fatalf("an expired record is shown: %+v", hits)
	}
	w.TTL = nil
	w.Key = "river-otter"
	put(t, a, projA, w)
	if hits := search("otter clams"); len(hits) != 1 || hits[0].Record.Key != "river-otter" {
		t.Fatalf("hits = %+v", hits)
	}
	if _, err := a.MoveProject(ctx, projA.ID, projB.ID, "/work/b"); err != nil {
		t.Fatal(err)
	}
	if hits := search("otter clams"); len(hits) != 0 {
		t.Fatalf("a record moved to another project is shown: %+v", hits)
	}
}

// FakeAWSKey makes a value shaped like an AWS access key id at test time,
// digits included, so that no realistic key is ever committed.
func FakeAWSKey() string {
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := []byte("AKIA")
	x := uint32(2654435761)
	for len(b) < 20 {
		x = x*1103515245 + 12345
		b = append(b, upper[x>>16%uint32(len(upper))])
	}
	b[7], b[12] = '7', '3'
	return string(b)
}
