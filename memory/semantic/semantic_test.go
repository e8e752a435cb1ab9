package semantic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/memory/embed/embedtest"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/secrets"
)

// standIn starts the loopback embeddings server and a client of it for
// model.
func standIn(t *testing.T, model string) (*embedtest.Server, *embed.Client) {
	t.Helper()
	srv, err := embedtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, client(t, srv, model)
}

func client(t *testing.T, srv *embedtest.Server, model string) *embed.Client {
	t.Helper()
	c, err := embed.New(embed.Config{URL: srv.URL, Model: model, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// embedAll embeds every queued record.
func embedAll(t *testing.T, s *testStore, c *embed.Client) EmbedResult {
	t.Helper()
	var total EmbedResult
	for range 100 {
		r, err := s.EmbedPending(ctx, c.Model(), c, 16)
		if err != nil {
			t.Fatal(err)
		}
		total.Embedded += r.Embedded
		total.Skipped += r.Skipped
		total.Dropped += r.Dropped
		if r == (EmbedResult{}) {
			return total
		}
	}
	t.Fatal("the queue never emptied")
	return total
}

func queryVec(t *testing.T, c *embed.Client, q string) []float32 {
	t.Helper()
	vs, err := c.Embed(ctx, []string{q})
	if err != nil {
		t.Fatal(err)
	}
	return vs[0]
}

func hitKeys(hits []memory.Hit) []string {
	var ks []string
	for _, h := range hits {
		ks = append(ks, h.Record.Key)
	}
	return ks
}

func semantic(t *testing.T, s *testStore, c *embed.Client, p scope.Identity, q string, opts memory.SearchOptions) []memory.Hit {
	t.Helper()
	opts.Query = q
	hits, err := s.SemanticSearch(ctx, p, opts, c.Model(), queryVec(t, c, q))
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func hybrid(t *testing.T, s *testStore, c *embed.Client, p scope.Identity, q string, opts memory.SearchOptions) []memory.Hit {
	t.Helper()
	opts.Query = q
	hits, err := s.HybridSearch(ctx, p, opts, c.Model(), queryVec(t, c, q))
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func sem(key, body string) memory.Write {
	return memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: body}
}

func TestSemanticFindsByMeaning(t *testing.T) {
	s, _ := mustOpen(t)
	_, c := standIn(t, "toy")
	put(t, s, projA, sem("shipping-howto", "To ship a release, tag it and run the pipeline."))
	put(t, s, projA, sem("pets", "The kitten sleeps on the sofa."))
	put(t, s, projA, sem("lunch", "Bananas and apples are in the kitchen."))
	if r := embedAll(t, s, c); r.Embedded != 3 {
		t.Fatalf("embedded %+v, want 3", r)
	}
	const q = "how do we deploy to production"
	kw, err := s.Search(ctx, projA.ID, memory.SearchOptions{Query: q})
	if err != nil {
		t.Fatal(err)
	}
	if len(kw) != 0 {
		t.Fatalf("keyword search found %v for a query sharing no word", hitKeys(kw))
	}
	for name, hits := range map[string][]memory.Hit{
		"semantic": semantic(t, s, c, projA.ID, q, memory.SearchOptions{}),
		"hybrid":   hybrid(t, s, c, projA.ID, q, memory.SearchOptions{}),
	} {
		if len(hits) == 0 || hits[0].Record.Key != "shipping-howto" {
			t.Errorf("%s: %v, want shipping-howto first", name, hitKeys(hits))
		}
		for _, h := range hits {
			if h.Score <= 0 || h.Score > 1 {
				t.Errorf("%s: score %v of %s outside (0, 1]", name, h.Score, h.Record.Key)
			}
			if h.Record.Body != "" {
				t.Errorf("%s: hit carries its body", name)
			}
		}
	}
	// The preview is the record's own text.
	hits := semantic(t, s, c, projA.ID, "feline", memory.SearchOptions{})
	if len(hits) == 0 || hits[0].Record.Key != "pets" || !strings.Contains(hits[0].Preview, "kitten") {
		t.Fatalf("feline: %+v", hits)
	}
}

func TestHybridKeepsExactHitsFirst(t *testing.T) {
	s, _ := mustOpen(t)
	_, c := standIn(t, "toy")
	put(t, s, projA, sem("backup-job", "Run the postgres backup every night from the ops box with the usual retention."))
	put(t, s, projA, sem("datastores", "database db sql sqlite datastore"))
	put(t, s, projA, sem("tuning", "postgres tuning: vacuum often"))
	put(t, s, projA, sem("unrelated", "The kitten sleeps."))
	embedAll(t, s, c)
	const q = "postgres backup"
	// By meaning alone the pure database record is nearest...
	if got := semantic(t, s, c, projA.ID, q, memory.SearchOptions{}); len(got) == 0 || got[0].Record.Key != "datastores" {
		t.Fatalf("semantic: %v; the test needs the fuzzy neighbour nearest by meaning", hitKeys(got))
	}
	// ...yet fused, the record holding both words comes first.
	hits := hybrid(t, s, c, projA.ID, q, memory.SearchOptions{})
	if len(hits) < 3 || hits[0].Record.Key != "backup-job" {
		t.Fatalf("hybrid: %v, want backup-job first", hitKeys(hits))
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Fatalf("hybrid scores not descending: %v at %d after %v", hits[i].Score, i, hits[i-1].Score)
		}
	}
	if hits[0].Score < hits[1].Score {
		t.Fatalf("exact hit scores %v below %v", hits[0].Score, hits[1].Score)
	}
	// min_score works on the fused score.
	cut := hybrid(t, s, c, projA.ID, q, memory.SearchOptions{MinScore: hits[1].Score + 1e-9})
	if len(cut) != 1 || cut[0].Record.Key != "backup-job" {
		t.Fatalf("min_score %v: %v", hits[1].Score, hitKeys(cut))
	}
	// A query of stop-words only has no keyword side; meaning still works.
	if _, err := s.HybridSearch(ctx, projA.ID, memory.SearchOptions{Query: "the of"}, c.Model(), queryVec(t, c, "the of")); err != nil {
		t.Fatalf("stop-words only: %v", err)
	}
}

func TestSemanticSeesOnlyVisibleRecords(t *testing.T) {
	s, clk := mustOpen(t)
	_, c := standIn(t, "toy")
	put(t, s, projA, sem("release-a", "ship the release"))
	put(t, s, projB, sem("release-b", "ship the release from b"))
	put(t, s, projB, memory.Write{Scope: scope.System, Type: memory.Semantic, Key: "release-sys", Body: "ship releases on fridays"})
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Working, Key: "release-note", Body: "shipping soon"})
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "release-old", Body: "ship it", TTL: ptrDur(time.Hour)})
	embedAll(t, s, c)
	clk.Add(2 * time.Hour) // release-old expires
	hits := semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{})
	got := strings.Join(hitKeys(hits), ",")
	for _, k := range []string{"release-a", "release-sys", "release-note"} {
		if !strings.Contains(got, k) {
			t.Errorf("missing %s in %s", k, got)
		}
	}
	for _, k := range []string{"release-b", "release-old"} {
		if strings.Contains(got, k) {
			t.Errorf("%s is not visible to project a, yet found: %s", k, got)
		}
	}
	typed := semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{Type: memory.Working})
	if len(typed) != 1 || typed[0].Record.Key != "release-note" {
		t.Errorf("type filter: %v", hitKeys(typed))
	}
	// A narrower record shadows a broader one of the same name.
	put(t, s, projA, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "release-sys", Body: "a kitten"})
	embedAll(t, s, c)
	for _, h := range semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{}) {
		if h.Record.Key == "release-sys" && h.Record.Scope != scope.Project {
			t.Errorf("the system record shows though the project one shadows it")
		}
	}
}

func ptrDur(d time.Duration) *time.Duration { return &d }

func TestUpdateAndDeleteDropVectors(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	put(t, s, projA, sem("fact", "ship the release"))
	embedAll(t, s, c)
	if hits := semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 1 {
		t.Fatalf("before: %v", hitKeys(hits))
	}
	body := "a kitten on the sofa"
	if _, err := s.Update(ctx, projA, memory.Selector{Key: "fact"}, memory.Patch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	st, _ := s.EmbedStatus(ctx, "toy")
	if st.Vectors != 0 || st.Pending != 1 {
		t.Fatalf("after update: %+v, want the vector dropped and the record queued", st)
	}
	if hits := semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 0 {
		t.Fatalf("the old text's vector still answers: %v", hitKeys(hits))
	}
	embedAll(t, s, c)
	if hits := semantic(t, s, c, projA.ID, "feline", memory.SearchOptions{}); len(hits) != 1 {
		t.Fatalf("after re-embedding: %v", hitKeys(hits))
	}
	// A change while the record is being embedded: the vector of the old
	// text is not kept, and the record stays queued.
	put(t, s, projA, sem("other", "a pear"))
	before := srv.Requests()
	srv.Hold()
	done := make(chan EmbedResult)
	go func() {
		r, err := s.EmbedPending(context.Background(), "toy", c, 16)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	body2 := "ship the release again"
	for srv.Requests() == before {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.Update(ctx, projA, memory.Selector{Key: "other"}, memory.Patch{Body: &body2}); err != nil {
		t.Fatal(err)
	}
	srv.Release()
	if r := <-done; r.Dropped != 1 || r.Embedded != 0 {
		t.Fatalf("raced round: %+v, want the changed record dropped", r)
	}
	embedAll(t, s, c)
	if hits := semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 1 || hits[0].Record.Key != "other" {
		t.Fatalf("after the race: %v", hitKeys(hits))
	}
	if _, err := s.Delete(ctx, projA, memory.Selector{Key: "other"}); err != nil {
		t.Fatal(err)
	}
	if hits := semantic(t, s, c, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 0 {
		t.Fatalf("deleted record still found: %v", hitKeys(hits))
	}
	if st, _ := s.EmbedStatus(ctx, "toy"); st.Vectors != 1 || st.Pending != 0 {
		t.Fatalf("after delete: %+v", st)
	}
}

func TestModelChangeNeverMixes(t *testing.T) {
	s, _ := mustOpen(t)
	srv, a := standIn(t, "toy-a")
	put(t, s, projA, sem("shipping", "ship the release"))
	put(t, s, projA, sem("pets", "a kitten"))
	embedAll(t, s, a)
	b := client(t, srv, "toy-b")
	// Before b has embedded anything, a search by b finds nothing: a's
	// vectors, of the same length, are never read for it.
	if hits := semantic(t, s, b, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 0 {
		t.Fatalf("model b found %v through model a's vectors", hitKeys(hits))
	}
	n, err := s.QueueMissing(ctx, "toy-b")
	if err != nil || n != 2 {
		t.Fatalf("queue for the new model: %d, %v", n, err)
	}
	if r := embedAll(t, s, b); r.Embedded != 2 {
		t.Fatalf("re-embedded %+v", r)
	}
	if hits := semantic(t, s, b, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 1 || hits[0].Record.Key != "shipping" {
		t.Fatalf("model b: %v", hitKeys(hits))
	}
	st, _ := s.EmbedStatus(ctx, "toy-b")
	if st.Vectors != 2 || st.Others["toy-a"] != 2 || st.Dims != embedtest.Dims {
		t.Fatalf("status: %+v", st)
	}
	// Switching back needs nothing new.
	if n, _ := s.QueueMissing(ctx, "toy-a"); n != 0 {
		t.Fatalf("switching back queued %d", n)
	}
	if hits := semantic(t, s, a, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 1 {
		t.Fatalf("model a again: %v", hitKeys(hits))
	}
	if n, err := s.PruneVectors(ctx, "toy-b"); err != nil || n != 2 {
		t.Fatalf("prune: %d, %v", n, err)
	}
}

// fixedEmbedder gives vectors of a set length, to change a model's
// dimensions under the same name.
type fixedEmbedder int

func (f fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, int(f))
		out[i][0] = 1
	}
	return out, nil
}

func TestModelReplacedUnderItsName(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, sem("one", "x"))
	put(t, s, projA, sem("two", "y"))
	if _, err := s.EmbedPending(ctx, "m", fixedEmbedder(8), 1); err != nil {
		t.Fatal(err)
	}
	// The next vector is longer: the model changed. The shorter one goes
	// and its record is embedded again.
	if _, err := s.EmbedPending(ctx, "m", fixedEmbedder(16), 1); err != nil {
		t.Fatal(err)
	}
	st, _ := s.EmbedStatus(ctx, "m")
	if st.Vectors != 1 || st.Dims != 16 || st.Pending != 1 {
		t.Fatalf("%+v", st)
	}
	for range 3 {
		if _, err := s.EmbedPending(ctx, "m", fixedEmbedder(16), 4); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := s.EmbedStatus(ctx, "m"); st.Vectors != 2 || st.Pending != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestSecretsNeverSent(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	const secret = "AKIA" + "Z7QW3RTY5UXP2KLM"
	if _, _, err := s.Put(ctx, projA, sem("token", "the token is "+secret)); !errors.Is(err, memory.ErrSecretRejected) {
		t.Fatalf("put a secret: %v", err)
	}
	put(t, s, projA, sem("fine", "ship the release"))
	// A row that never went through Put (an older build's, say) is still
	// scanned on its way out.
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO records (id, project, scope, type, key, body, created_at, updated_at)
		VALUES ('raw', ?, 0, 'semantic', 'raw', ?, 0, 0)`, string(projA.ID), "key "+secret); err != nil {
		t.Fatal(err)
	}
	r := embedAll(t, s, c)
	if r.Embedded != 1 || r.Skipped != 1 {
		t.Fatalf("%+v, want one embedded and the secret skipped", r)
	}
	for _, in := range srv.Inputs() {
		if strings.Contains(in, secret) || strings.Contains(in, secret[:12]) {
			t.Fatalf("the endpoint received a secret: %q", in)
		}
	}
	// And it is not queued again.
	if st, _ := s.EmbedStatus(ctx, "toy"); st.Pending != 0 || st.Refused != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestRefusedInputsAreShortenedOrSkipped(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	srv.SetMaxInput(600)
	for i := range 5 {
		put(t, s, projA, sem(fmt.Sprintf("short-%d", i), "ship it"))
	}
	put(t, s, projA, sem("long", "deploy "+strings.Repeat("the release goes out today ", 200)))
	r := embedAll(t, s, c)
	if r.Embedded != 6 || r.Skipped != 0 {
		t.Fatalf("%+v: the long text should have been cut until accepted", r)
	}
	srv.SetMaxInput(10) // now even the shortest cut is refused
	put(t, s, projA, sem("longer", strings.Repeat("kitten ", 100)))
	r = embedAll(t, s, c)
	if r.Embedded != 0 || r.Skipped != maxTries {
		t.Fatalf("%+v, want %d refusals", r, maxTries)
	}
	// It stays queued, refused, until another QueueMissing gives it a chance.
	st, _ := s.EmbedStatus(ctx, "toy")
	if st.Refused != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestEndpointDownKeepsTheQueue(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	srv.Down()
	put(t, s, projA, sem("shipping", "ship the release"))
	_, err := s.EmbedPending(ctx, "toy", c, 16)
	var ee *embed.Error
	if !errors.As(err, &ee) || !ee.Unreachable {
		t.Fatalf("down: %v", err)
	}
	if strings.Contains(err.Error(), "ship") {
		t.Fatalf("the error holds the input: %v", err)
	}
	if st, _ := s.EmbedStatus(ctx, "toy"); st.Pending != 1 {
		t.Fatalf("%+v", st)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	if r := embedAll(t, s, c); r.Embedded != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestQueueSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/memory.db"
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, projA, sem("shipping", "ship the release"))
	s.Close()
	s, err = openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, c := standIn(t, "toy")
	if r := embedAll(t, s, c); r.Embedded != 1 {
		t.Fatalf("%+v", r)
	}
}

func TestLeaseEmbedding(t *testing.T) {
	s, clk := mustOpen(t)
	if ok, err := s.LeaseEmbedding(ctx, "a", time.Minute); err != nil || !ok {
		t.Fatalf("first lease: %v %v", ok, err)
	}
	if ok, _ := s.LeaseEmbedding(ctx, "b", time.Minute); ok {
		t.Fatal("b took a's running lease")
	}
	if ok, _ := s.LeaseEmbedding(ctx, "a", time.Minute); !ok {
		t.Fatal("a could not renew")
	}
	clk.Add(2 * time.Minute)
	if ok, _ := s.LeaseEmbedding(ctx, "b", time.Minute); !ok {
		t.Fatal("b could not take a lease that ran out")
	}
	if err := s.ReleaseEmbedding(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.LeaseEmbedding(ctx, "a", time.Minute); !ok {
		t.Fatal("a could not take a released lease")
	}
}

// TestSemanticTeamIdentities: on a team server each profile finds by
// meaning its own records, its user's, its tenant's and the system's,
// never another user's or tenant's, nor a workspace-root project's
// workspace records in the global bucket.
func TestSemanticTeamIdentities(t *testing.T) {
	s, _ := mustOpen(t)
	_, c := standIn(t, "toy")
	alice := memory.Project{ID: memory.TeamIdentity("acme", "alice", "default")}
	alice2 := memory.Project{ID: memory.TeamIdentity("acme", "alice", "laptop")}
	bob := memory.Project{ID: memory.TeamIdentity("acme", "bob", "default")}
	eve := memory.Project{ID: memory.TeamIdentity("evil", "eve", "default")}
	w := func(l scope.Level, key string) memory.Write {
		return memory.Write{Scope: l, Type: memory.Semantic, Key: key, Body: "ship the release"}
	}
	put(t, s, alice, w(scope.Project, "alice-profile"))
	put(t, s, alice2, w(scope.Workspace, "alice-user"))
	put(t, s, bob, w(scope.Tenant, "acme-team"))
	put(t, s, bob, w(scope.Project, "bob-profile"))
	put(t, s, eve, w(scope.Tenant, "evil-team"))
	put(t, s, projA, w(scope.Workspace, "machine-workspace"))
	put(t, s, projA, w(scope.System, "machine-system"))
	embedAll(t, s, c)
	got := strings.Join(hitKeys(semantic(t, s, c, alice.ID, "deploy", memory.SearchOptions{Limit: 20})), ",")
	for _, k := range []string{"alice-profile", "alice-user", "acme-team", "machine-system"} {
		if !strings.Contains(got, k) {
			t.Errorf("alice misses %s: %s", k, got)
		}
	}
	for _, k := range []string{"bob-profile", "evil-team", "machine-workspace"} {
		if strings.Contains(got, k) {
			t.Errorf("alice sees %s: %s", k, got)
		}
	}
}

// TestFuseProperties checks the fusion on many random pairs of rankings:
// exact hits before every other record, scores within 0..1 and never
// rising down the list, no record twice, the limit and min_score kept.
func TestFuseProperties(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	terms := memory.Terms("postgres backup")
	kept := 0 // rounds with any hit: the checks below must see some
	for round := range 2000 {
		pool := make([]memory.Hit, 30)
		for i := range pool {
			body := "something else"
			switch r.Intn(3) {
			case 0:
				body = "the postgres backup runs"
			case 1:
				body = "postgres only"
			}
			pool[i] = memory.Hit{Record: memory.Record{ID: fmt.Sprint(i), Key: fmt.Sprintf("k%d", i), Body: body}}
		}
		// Each ranking best first, with scores within 0..1 falling down it,
		// as Search and SemanticSearch give them.
		pick := func() []memory.Hit {
			var l []memory.Hit
			score := 0.2 + 0.8*r.Float64()
			for _, i := range r.Perm(len(pool))[:r.Intn(len(pool))] {
				h := pool[i]
				h.Score = score
				score *= r.Float64()
				l = append(l, h)
			}
			return l
		}
		kw, sem := pick(), pick()
		limit, minScore := 1+r.Intn(20), r.Float64()*0.6
		out := fuse(kw, sem, terms, nil, limit, minScore, false)
		if len(out) > 0 {
			kept++
		}
		if len(out) > limit {
			t.Fatalf("round %d: %d hits over the limit %d", round, len(out), limit)
		}
		seen := map[string]bool{}
		sawFuzzy := false
		for i, h := range out {
			if seen[h.Record.ID] {
				t.Fatalf("round %d: %s twice", round, h.Record.ID)
			}
			seen[h.Record.ID] = true
			if h.Score < minScore || h.Score < 0 || h.Score > 1 {
				t.Fatalf("round %d: score %v (min %v)", round, h.Score, minScore)
			}
			if i > 0 && h.Score > out[i-1].Score {
				t.Fatalf("round %d: score rises at %d", round, i)
			}
			exact := strings.Contains(pool[mustAtoi(h.Record.ID)].Record.Body, "postgres backup")
			if exact && sawFuzzy {
				t.Fatalf("round %d: exact hit %s below a fuzzy one", round, h.Record.ID)
			}
			sawFuzzy = sawFuzzy || !exact
			if h.Record.Body != "" {
				t.Fatalf("round %d: body kept", round)
			}
		}
	}
	if kept < 1000 {
		t.Fatalf("only %d of 2000 rounds kept any hit", kept)
	}
}

// TestFuseWeighsSimilarity checks what the similarity does to the keyword
// order: a model that finds every record about as similar leaves it, and
// one that tells them apart moves the record it finds much nearer up.
func TestFuseWeighsSimilarity(t *testing.T) {
	hit := func(id string, score float64) memory.Hit {
		return memory.Hit{Record: memory.Record{ID: id, Key: id, Body: "words"}, Score: score}
	}
	keys := func(hs []memory.Hit) string {
		var ks []string
		for _, h := range hs {
			ks = append(ks, h.Record.Key)
		}
		return strings.Join(ks, " ")
	}
	terms := memory.Terms("nothing held")
	kw := []memory.Hit{hit("a", 1), hit("b", 0.6), hit("c", 0.3)}
	// About as similar, c nearest by a hair, a not among the neighbours:
	// rank fusion put c first.
	flat := []memory.Hit{hit("c", 0.51), hit("x", 0.505), hit("b", 0.50), hit("y", 0.49)}
	if got := keys(fuse(kw, flat, terms, nil, 3, 0, false)); got != "a b c" {
		t.Errorf("flat similarities: %s, want the keyword order a b c", got)
	}
	// c much nearer than the rest: it passes b, and a, the best keyword
	// hit and no neighbour, stays first.
	sharp := []memory.Hit{hit("c", 0.9), hit("x", 0.3), hit("b", 0.25), hit("y", 0.2)}
	if got := keys(fuse(kw, sharp, terms, nil, 4, 0, false)); got != "a c b x" {
		t.Errorf("sharp similarities: %s, want a c b x", got)
	}
	// Beside keyword hits, a record found by meaning alone scores half
	// its similarity: min_score drops the nearest of unrelated records.
	far := []memory.Hit{hit("x", 0.3)}
	if got := keys(fuse(kw[:1], far, terms, nil, 5, 0.2, false)); got != "a" {
		t.Errorf("min_score 0.2: %s, want a alone", got)
	}
	// With no keyword hit, the score is the similarity, as in semantic
	// search.
	if out := fuse(nil, far, terms, nil, 5, 0, false); len(out) != 1 || out[0].Score != 0.3 {
		t.Errorf("meaning alone: %+v, want x at 0.3", out)
	}
}

func mustAtoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func TestEmbedWaitingCountsOnlyWhatTheCallerSees(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, sem("mine", "x"))
	put(t, s, projB, sem("theirs", "y"))
	put(t, s, projB, memory.Write{Scope: scope.System, Type: memory.Semantic, Key: "shared", Body: "z"})
	for p, want := range map[*memory.Project]int{&projA: 2, &projB: 2} {
		if n, err := s.EmbedWaiting(ctx, p.ID, "m"); err != nil || n != want {
			t.Errorf("%s: %d waiting, %v; want %d", p.ID, n, err, want)
		}
	}
	if n, _ := s.EmbedQueued(ctx, "m"); n != 3 {
		t.Errorf("queued %d, want 3", n)
	}
}

func TestNoteDims(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, sem("one", "x"))
	if _, err := s.EmbedPending(ctx, "m", fixedEmbedder(8), 4); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.NoteDims(ctx, "m", 8); err != nil || changed {
		t.Fatalf("same length: %v %v", changed, err)
	}
	if changed, err := s.NoteDims(ctx, "other", 16); err != nil || changed {
		t.Fatalf("another model: %v %v", changed, err)
	}
	if changed, err := s.NoteDims(ctx, "m", 16); err != nil || !changed {
		t.Fatalf("new length: %v %v", changed, err)
	}
	if st, _ := s.EmbedStatus(ctx, "m"); st.Vectors != 0 || st.Pending != 1 {
		t.Fatalf("%+v", st)
	}
}

// A text the endpoint refuses is cut shorter, and the cut can turn a
// harmless long token into one of a secret's exact shape: the shorter
// text is scanned again before it is sent.
func TestCutTextIsScannedAgain(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	srv.SetMaxInput(600)
	// 42 characters after ghp_ is no GitHub token; its first 36 are.
	token := "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5" + "hJ7kL9"
	filler := strings.Repeat("word ", 80)                            // 400 bytes
	body := filler + token + " " + strings.Repeat("word ", 90)[:436] // "k\n\n"+body is 886 bytes; its half ends 36 bytes into the token
	if _, found := secrets.Scan(EmbedText(memory.Record{Key: "k", Body: body})); found {
		t.Fatal("the whole text already looks like a secret; the test proves nothing")
	}
	if cut := cutText(EmbedText(memory.Record{Key: "k", Body: body}), 443); !strings.HasSuffix(cut, token[:40]) {
		t.Fatalf("the cut ends in %q", cut[len(cut)-20:])
	}
	put(t, s, projA, sem("k", body))
	embedAll(t, s, c)
	for _, in := range srv.Inputs() {
		if f, found := secrets.Scan(in); found {
			t.Fatalf("the endpoint received a text matching rule %s", f.Rule)
		}
	}
}

// Two servers with two models share one database, as when the model is
// changed while an older server still runs: whichever holds the queue
// must not take the other's work off it, nor embed again what it has.
func TestTwoModelsShareTheQueue(t *testing.T) {
	s, _ := mustOpen(t)
	srv, a := standIn(t, "toy-a")
	b := client(t, srv, "toy-b")
	put(t, s, projA, sem("shipping", "ship the release"))
	put(t, s, projA, sem("pets", "a kitten"))
	embedAll(t, s, a)
	if n, err := s.QueueMissing(ctx, "toy-b"); err != nil || n != 2 {
		t.Fatalf("queue for model b: %d, %v", n, err)
	}
	// Server a holds the queue and works through it first.
	if r := embedAll(t, s, a); r.Embedded != 0 {
		t.Fatalf("model a embedded %+v again", r)
	}
	if n := srv.Models()["toy-a"]; n != 2 {
		t.Fatalf("model a embedded %d texts, want its 2", n)
	}
	if n, _ := s.EmbedQueued(ctx, "toy-a"); n != 0 {
		t.Fatalf("model a sees %d waiting", n)
	}
	if n, _ := s.EmbedWaiting(ctx, projA.ID, "toy-a"); n != 0 {
		t.Fatalf("a search with model a is told %d wait", n)
	}
	if n, _ := s.EmbedQueued(ctx, "toy-b"); n != 2 {
		t.Fatalf("model b sees %d waiting, want 2", n)
	}
	if r := embedAll(t, s, b); r.Embedded != 2 {
		t.Fatalf("model b embedded %+v", r)
	}
	// A record stored now is embedded by a, which holds the queue; b
	// finds it missing when it looks again.
	put(t, s, projA, sem("deploying", "deploy to production"))
	if r := embedAll(t, s, a); r.Embedded != 1 {
		t.Fatalf("model a embedded %+v", r)
	}
	if n, err := s.QueueOthersEmbedded(ctx, "toy-b"); err != nil || n != 1 {
		t.Fatalf("queue for model b again: %d, %v", n, err)
	}
	if r := embedAll(t, s, b); r.Embedded != 1 {
		t.Fatalf("model b embedded %+v", r)
	}
	if hits := semantic(t, s, b, projA.ID, "release", memory.SearchOptions{}); len(hits) != 2 {
		t.Fatalf("model b: %v", hitKeys(hits))
	}
}

func TestQueueOthersEmbeddedWithOneModel(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	put(t, s, projA, sem("fine", "ship"))
	embedAll(t, s, c)
	srv.SetMaxInput(10)
	put(t, s, projA, sem("longer", strings.Repeat("puppy ", 100)))
	embedAll(t, s, c) // refused maxTries times
	if n, err := s.QueueOthersEmbedded(ctx, "toy"); err != nil || n != 0 {
		t.Fatalf("one model: queued %d, %v", n, err)
	}
	if st, _ := s.EmbedStatus(ctx, "toy"); st.Refused != 1 {
		t.Fatalf("a refused record was given another chance: %+v", st)
	}
}

// An exact keyword hit that the keyword ranking puts deep (a long record
// holding each word once, among many short ones repeating one of them)
// still comes before every fuzzy neighbour in hybrid search.
func TestHybridFindsDeepExactHits(t *testing.T) {
	s, _ := mustOpen(t)
	_, c := standIn(t, "toy")
	for i := range 40 {
		put(t, s, projA, sem(fmt.Sprintf("pg-%d", i), "postgres postgres postgres tuning"))
		put(t, s, projA, sem(fmt.Sprintf("bk-%d", i), "backup backup backup schedule"))
	}
	filler := strings.Repeat("the quarterly planning notes mention many unrelated things ", 60)
	put(t, s, projA, sem("exact", filler+" postgres "+filler+" backup "+filler))
	embedAll(t, s, c)
	for _, limit := range []int{1, 5, 10} {
		hits := hybrid(t, s, c, projA.ID, "postgres backup", memory.SearchOptions{Limit: limit})
		if len(hits) == 0 || hits[0].Record.Key != "exact" {
			t.Errorf("limit %d: %v, want the exact hit first", limit, hitKeys(hits))
		}
	}
}

// A server keeps its vectors in memory; a restore by another process
// under it must not leave it ranking the restored records by the vectors
// of the records they replaced.
func TestRestoreSeenByTheVectorIndex(t *testing.T) {
	dir := t.TempDir()
	_, c := standIn(t, "toy")
	other, err := openTarget(ctx, filepath.Join(dir, "other.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i := range 6 {
		put(t, other, projA, sem(fmt.Sprintf("pets-%d", i), "the kitten sleeps on the sofa"))
	}
	embedAll(t, other, c)
	backup := filepath.Join(dir, "backup.db")
	if err := other.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, "memory.db")
	server, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	put(t, server, projA, sem("shipping", "ship the release"))
	put(t, server, projA, sem("deploying", "deploy to production"))
	embedAll(t, server, c)
	if hits := semantic(t, server, c, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 2 {
		t.Fatalf("before the restore: %v", hitKeys(hits))
	}

	admin, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.RestoreFrom(ctx, backup, filepath.Join(dir, "kept.db"), nil); err != nil {
		t.Fatal(err)
	}
	if hits := semantic(t, server, c, projA.ID, "deploy", memory.SearchOptions{}); len(hits) != 0 {
		t.Errorf("after the restore, deploy finds %v by the vectors of records gone", hitKeys(hits))
	}
	if hits := semantic(t, server, c, projA.ID, "feline", memory.SearchOptions{}); len(hits) != 6 {
		t.Errorf("after the restore, feline finds %v, want the 6 restored", hitKeys(hits))
	}
}

// The key is sent as words ("deploy-notes" as "deploy notes"), which
// breaks a token like ghp_… apart: the key is scanned as stored too.
func TestSecretInKeyNeverSent(t *testing.T) {
	s, _ := mustOpen(t)
	srv, c := standIn(t, "toy")
	const token = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
	if _, found := secrets.Scan(token); !found {
		t.Fatal("the token is not a secret to the scanner; the test proves nothing")
	}
	// A row that never went through Put, as an older build stored it.
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO records (id, project, scope, type, key, body, created_at, updated_at)
		VALUES ('raw', ?, 0, 'semantic', ?, 'notes', 0, 0)`, string(projA.ID), token); err != nil {
		t.Fatal(err)
	}
	embedAll(t, s, c)
	for _, in := range srv.Inputs() {
		if strings.Contains(in, token[4:16]) {
			t.Fatalf("the endpoint received the key's secret: %q", in)
		}
	}
}

// poisonServer embeds like the stand-in, but fails (HTTP 500) on any
// request holding an input with "poison" in it, as a model server that
// crashes on one text does.
func poisonServer(t *testing.T) (*embed.Client, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i, in := range req.Input {
			if strings.Contains(in, "poison") {
				http.Error(w, `{"error":"the model crashed"}`, http.StatusInternalServerError)
				return
			}
			out.Data = append(out.Data, item{i, embedtest.Embed(req.Model, in)})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	c, err := embed.New(embed.Config{URL: srv.URL + "/v1", Model: "toy", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

// One record whose text the endpoint fails on must not keep every record
// queued after it from being embedded.
func TestPoisonRecordDoesNotBlockTheQueue(t *testing.T) {
	s, _ := mustOpen(t)
	c, calls := poisonServer(t)
	put(t, s, projA, sem("first", "ship the release"))
	put(t, s, projA, sem("bad", "a poison text"))
	put(t, s, projA, sem("third", "a kitten"))
	put(t, s, projA, sem("fourth", "deploy to production"))
	for range 10 {
		r, _ := s.EmbedPending(ctx, "toy", c, 16)
		if r == (EmbedResult{}) {
			break
		}
	}
	st, err := s.EmbedStatus(ctx, "toy")
	if err != nil {
		t.Fatal(err)
	}
	if st.Vectors != 3 {
		t.Fatalf("%+v: want the 3 other records embedded", st)
	}
	if st.Refused != 1 || st.Pending != 0 {
		t.Fatalf("%+v: want the poison record refused", st)
	}
	// An endpoint failing on everything is down, not refusing each text.
	before := calls.Load()
	put(t, s, projA, sem("fifth", "poison one"))
	put(t, s, projA, sem("sixth", "poison two"))
	if _, err := s.EmbedPending(ctx, "toy", c, 16); err == nil {
		t.Fatal("an endpoint failing on every text gave no error")
	}
	if st, _ := s.EmbedStatus(ctx, "toy"); st.Refused != 1 {
		t.Fatalf("%+v: records counted as refused while every text failed", st)
	}
	if n := calls.Load() - before; n > 3 {
		t.Fatalf("%d requests for 2 records", n)
	}
}

// TestHybridMinScoreDropsMereNeighbours: with no keyword hit, the records
// nearest an unrelated query are still returned ranked, but each scores by
// its similarity, so a min_score drops them; a record near in meaning stays.
func TestHybridMinScoreDropsMereNeighbours(t *testing.T) {
	s, _ := mustOpen(t)
	_, c := standIn(t, "toy")
	put(t, s, projA, sem("pets", "The kitten sleeps on the sofa."))
	put(t, s, projA, sem("deploy", "Releases are tagged on main and deployed by CI."))
	embedAll(t, s, c)
	all := hybrid(t, s, c, projA.ID, "zebra violin", memory.SearchOptions{})
	if len(all) == 0 {
		t.Fatal("hybrid of an unrelated query found no neighbour at all; the test needs some")
	}
	for _, h := range all {
		if h.Score >= 0.5 {
			t.Errorf("mere neighbour %s scores %v", h.Record.Key, h.Score)
		}
	}
	if cut := hybrid(t, s, c, projA.ID, "zebra violin", memory.SearchOptions{MinScore: 0.5}); len(cut) != 0 {
		t.Errorf("min_score 0.5 kept mere neighbours: %v", hitKeys(cut))
	}
	near := hybrid(t, s, c, projA.ID, "feline", memory.SearchOptions{MinScore: 0.5})
	if len(near) == 0 || near[0].Record.Key != "pets" {
		t.Errorf("min_score 0.5 dropped the record near in meaning: %v", hitKeys(near))
	}
}

// The vector index too sees at once what another Store embedded, and
// what it removed.
func TestSeesVectorsOfOtherStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s1 := openPath(t, path)
	s2 := openPath(t, path)
	_, c := standIn(t, "toy")
	const q = "feline"
	if hits := semantic(t, s1, c, projA.ID, q, memory.SearchOptions{}); len(hits) != 0 {
		t.Fatalf("hits in an empty store: %v", hitKeys(hits))
	}
	put(t, s2, projA, sem("pets", "The kitten sleeps on the sofa."))
	embedAll(t, s2, c)
	if hits := semantic(t, s1, c, projA.ID, q, memory.SearchOptions{}); len(hits) == 0 || hits[0].Record.Key != "pets" {
		t.Fatalf("the other store's vector is not seen: %v", hitKeys(hits))
	}
	if _, err := s2.Delete(ctx, projA, memory.Selector{Key: "pets", Type: memory.Semantic}); err != nil {
		t.Fatal(err)
	}
	if hits := semantic(t, s1, c, projA.ID, q, memory.SearchOptions{}); len(hits) != 0 {
		t.Fatalf("the other store's delete is not seen: %v", hitKeys(hits))
	}
}
