package memory

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/scope"
)

func keysOf(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Record.Key)
	}
	return out
}

func mustSearch(t *testing.T, s *Store, p Project, opts SearchOptions) []Hit {
	t.Helper()
	hits, err := s.Search(ctx, p.ID, opts)
	if err != nil {
		t.Fatalf("search %q: %v", opts.Query, err)
	}
	return hits
}

// TestSearchSeesOtherHandles opens one database twice, as two server
// processes would: what one writes, updates and deletes, the other's
// search sees at once.
func TestSearchSeesOtherHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	a, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put(t, a, projA, Write{Type: Semantic, Key: "ci", Body: "CI runs on buildkite agents."})
	// b loads its index now, before the next writes.
	if got := keysOf(mustSearch(t, b, projA, SearchOptions{Query: "buildkite"})); !cmp.Equal(got, []string{"ci"}) {
		t.Fatalf("b finds %v", got)
	}
	put(t, a, projA, Write{Type: Procedural, Key: "release", Body: "Tag the release, then run goreleaser."})
	if got := keysOf(mustSearch(t, b, projA, SearchOptions{Query: "goreleaser"})); !cmp.Equal(got, []string{"release"}) {
		t.Errorf("b misses a's new record: %v", got)
	}
	body := "CI runs on github actions."
	if _, err := a.Update(ctx, projA, Selector{Key: "ci"}, Patch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	if got := mustSearch(t, b, projA, SearchOptions{Query: "buildkite"}); len(got) != 0 {
		t.Errorf("old text still found: %v", keysOf(got))
	}
	if got := keysOf(mustSearch(t, b, projA, SearchOptions{Query: "github actions"})); !cmp.Equal(got, []string{"ci"}) {
		t.Errorf("new text: %v", got)
	}
	if _, err := a.Delete(ctx, projA, Selector{Key: "release"}); err != nil {
		t.Fatal(err)
	}
	if got := mustSearch(t, b, projA, SearchOptions{Query: "goreleaser release"}); len(got) != 0 {
		t.Errorf("deleted record found: %v", keysOf(got))
	}
	// And the writer's own index follows its writes too.
	if got := mustSearch(t, a, projA, SearchOptions{Query: "goreleaser"}); len(got) != 0 {
		t.Errorf("writer finds its deleted record: %v", keysOf(got))
	}
}

func TestSearchPartitionsIsolated(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "db", Body: "We run postgres 16 with pgbouncer."})
	put(t, s, projA, Write{Type: Semantic, Key: "cache", Body: "Redis holds sessions."})
	put(t, s, projB, Write{Type: Semantic, Key: "b-secret-plan", Body: "Project B moves to postgres too."})
	put(t, s, projA, Write{Scope: scope.System, Type: Semantic, Key: "shared", Body: "Every team prefers postgres."})
	before := mustSearch(t, s, projA, SearchOptions{Query: "postgres"})
	if got := keysOf(before); len(got) != 2 || slices.Contains(got, "b-secret-plan") {
		t.Fatalf("A sees %v", got)
	}
	for i := range 300 {
		put(t, s, projB, Write{Type: Semantic, Key: fmt.Sprintf("b-%d", i), Body: "postgres postgres notes"})
	}
	after := mustSearch(t, s, projA, SearchOptions{Query: "postgres"})
	if !cmp.Equal(keysOf(before), keysOf(after)) {
		t.Fatalf("A's results moved: %v then %v", keysOf(before), keysOf(after))
	}
	for i := range before {
		if before[i].Score != after[i].Score {
			t.Errorf("%s: score %v became %v as B grew", before[i].Record.Key, before[i].Score, after[i].Score)
		}
	}
	if got := keysOf(mustSearch(t, s, projB, SearchOptions{Query: "pgbouncer"})); len(got) != 0 {
		t.Errorf("B sees A's record: %v", got)
	}
}

func TestSearchFoldsAndSegments(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "uber", Body: "Über alles: die Straße ist gesperrt."})
	put(t, s, projA, Write{Type: Semantic, Key: "school", Body: "L'école du code ouvre à neuf heures."})
	put(t, s, projA, Write{Type: Semantic, Key: "zh", Description: "中文搜索说明", Body: "我们使用全文搜索引擎来查找记忆。"})
	put(t, s, projA, Write{Type: Semantic, Key: "ja", Body: "東京の天気は晴れです"})
	for _, c := range []struct{ q, want string }{
		{"ÜBER", "uber"}, {"über", "uber"}, {"uber", "uber"}, {"STRASSE", "uber"},
		{"école", "school"}, {"ecole", "school"}, {"ÉCOLE", "school"},
		{"全文搜索", "zh"}, {"搜索", "zh"}, {"记忆", "zh"}, {"東京", "ja"}, {"天気", "ja"},
	} {
		hits := mustSearch(t, s, projA, SearchOptions{Query: c.q})
		if len(hits) == 0 || hits[0].Record.Key != c.want {
			t.Errorf("%q found %v, want %s first", c.q, keysOf(hits), c.want)
		}
	}
}

func TestSearchExactPhraseFirst(t *testing.T) {
	s, _ := mustOpen(t)
	for i := range 40 {
		put(t, s, projA, Write{Type: Semantic, Key: fmt.Sprintf("note-%d", i),
			Body: "The deploy script checks the staging database before the rollout, and retries the rollout once."})
	}
	put(t, s, projA, Write{Type: Semantic, Key: "rollback", Body: "If the canary fails, the database rollout script rolls back first."})
	hits := mustSearch(t, s, projA, SearchOptions{Query: "database rollout script"})
	if len(hits) == 0 || hits[0].Record.Key != "rollback" {
		t.Fatalf("top %v, want rollback", keysOf(hits))
	}
	if w := hits[0].Why; !cmp.Equal(w.Terms, []string{"database", "rollout", "script"}) || !cmp.Equal(w.Fields, []string{"body"}) {
		t.Errorf("why = %+v", w)
	}
}

func TestSearchCodeWords(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Procedural, Key: "push", Body: "Never git push --force to main; use --force-with-lease."})
	put(t, s, projA, Write{Type: Procedural, Key: "build", Body: "Build with go build ./cmd/memory-mcp and run make test."})
	put(t, s, projA, Write{Type: Semantic, Key: "conns", Body: "The pool size is max_open_conns in config.yaml."})
	put(t, s, projA, Write{Type: Semantic, Key: "prose", Body: "Forcing a build of the config is rarely needed."})
	for _, c := range []struct{ q, want string }{
		{"--force", "push"}, {"--force-with-lease", "push"}, {"./cmd/memory-mcp", "build"}, {"go", "build"},
		{"make test", "build"}, {"max_open_conns", "conns"}, {"config.yaml", "conns"},
	} {
		hits := mustSearch(t, s, projA, SearchOptions{Query: c.q})
		if len(hits) == 0 || hits[0].Record.Key != c.want {
			t.Errorf("%q found %v, want %s first", c.q, keysOf(hits), c.want)
		}
	}
}

func TestSearchScopeChainFiltersAndExpiry(t *testing.T) {
	s, c := mustOpen(t)
	put(t, s, projA, Write{Scope: scope.System, Type: Semantic, Key: "test-runner", Body: "use go test for the runner"})
	put(t, s, projA, Write{Type: Semantic, Key: "test-runner", Body: "use make test for the runner", Tags: []string{"ci"}})
	hits := mustSearch(t, s, projA, SearchOptions{Query: "runner"})
	if len(hits) != 1 || hits[0].Record.Scope != scope.Project {
		t.Fatalf("shadowed record shows: %+v", hits)
	}
	// Another project sees the system record.
	if hits := mustSearch(t, s, projB, SearchOptions{Query: "runner"}); len(hits) != 1 || hits[0].Record.Scope != scope.System {
		t.Fatalf("B: %+v", hits)
	}
	if _, err := s.Delete(ctx, projA, Selector{Key: "test-runner", Scope: ptrLevel(scope.Project)}); err != nil {
		t.Fatal(err)
	}
	if hits := mustSearch(t, s, projA, SearchOptions{Query: "runner"}); len(hits) != 1 || hits[0].Record.Scope != scope.System {
		t.Fatalf("after delete: %+v", hits)
	}
	ttl := time.Hour
	put(t, s, projA, Write{Type: Working, Key: "scratch", Body: "runner scratch note", TTL: &ttl, Tags: []string{"tmp"}})
	put(t, s, projA, Write{Type: Procedural, Key: "runbook", Body: "the runner restarts nightly", Tags: []string{"ops", "tmp"}})
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "runner", Type: Working})); !cmp.Equal(got, []string{"scratch"}) {
		t.Errorf("type filter: %v", got)
	}
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "runner", Types: []Type{Procedural, Semantic}})); len(got) != 2 || slices.Contains(got, "scratch") {
		t.Errorf("types filter: %v", got)
	}
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "runner", Tags: []string{"ops", "tmp"}})); !cmp.Equal(got, []string{"runbook"}) {
		t.Errorf("tags filter: %v", got)
	}
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "runner", Scope: ptrLevel(scope.System)})); !cmp.Equal(got, []string{"test-runner"}) {
		t.Errorf("scope filter: %v", got)
	}
	if got := mustSearch(t, s, projA, SearchOptions{Query: "runner", Since: c.Now().Add(time.Second)}); len(got) != 0 {
		t.Errorf("since filter: %v", keysOf(got))
	}
	if got := mustSearch(t, s, projA, SearchOptions{Query: "runner", MinScore: 0.99}); len(got) != 0 {
		t.Errorf("min_score filter: %v", keysOf(got))
	}
	c.Add(2 * time.Hour)
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "scratch runner"})); slices.Contains(got, "scratch") {
		t.Errorf("expired record found: %v", got)
	}
}

// TestSearchRowidReused deletes the newest record, so SQLite may give its
// rowid to the next record, written by another project: the first
// project's index must drop the old record and never show the new one.
func TestSearchRowidReused(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "keep", Body: "shared word alpha"})
	put(t, s, projA, Write{Type: Semantic, Key: "gone", Body: "shared word omega"})
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "shared"})); len(got) != 2 {
		t.Fatalf("before: %v", got)
	}
	if _, err := s.Delete(ctx, projA, Selector{Key: "gone"}); err != nil {
		t.Fatal(err)
	}
	put(t, s, projB, Write{Type: Semantic, Key: "b-record", Body: "shared word omega from b"})
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "shared omega"})); !cmp.Equal(got, []string{"keep"}) {
		t.Errorf("A sees %v", got)
	}
	if got := keysOf(mustSearch(t, s, projB, SearchOptions{Query: "omega"})); !cmp.Equal(got, []string{"b-record"}) {
		t.Errorf("B sees %v", got)
	}
}

// TestSearchConcurrent searches through two handles while both write,
// for the race detector and for hits that must stay readable.
func TestSearchConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	var stores []*Store
	for range 2 {
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	done := make(chan error, 8)
	for w := range 4 {
		go func() {
			s := stores[w%2]
			for i := range 25 {
				key := fmt.Sprintf("note-%d-%d", w, i)
				if _, _, err := s.Put(ctx, projA, Write{Type: Semantic, Key: key, Body: fmt.Sprintf("concurrent note %d from writer %d", i, w)}); err != nil {
					done <- err
					return
				}
				if i%5 == 4 {
					if _, err := s.Delete(ctx, projA, Selector{Key: key}); err != nil {
						done <- err
						return
					}
				}
				if _, err := s.Search(ctx, projA.ID, SearchOptions{Query: "concurrent note", Limit: 20}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range stores {
		hits := mustSearch(t, s, projA, SearchOptions{Query: "concurrent", Limit: 100})
		if len(hits) != 80 {
			t.Errorf("%d hits, want the 80 records left", len(hits))
		}
	}
}

// TestSearchPreview checks the excerpt: one line around the first matched
// word, marked where it cuts the body, whole runes, about 160 bytes.
func TestSearchPreview(t *testing.T) {
	s, _ := mustOpen(t)
	long := strings.Repeat("filler words with ünïcödé letters\n\t", 12) + "the Kubernetes upgrade needs a drain first " + strings.Repeat("then more text  follows\n", 20)
	put(t, s, projA, Write{Type: Semantic, Key: "long", Body: long})
	put(t, s, projA, Write{Type: Semantic, Key: "short", Body: "\n  Kubernetes\tnotes. "})
	hits := mustSearch(t, s, projA, SearchOptions{Query: "kubernetes upgrade"})
	if len(hits) != 2 {
		t.Fatalf("hits %v", keysOf(hits))
	}
	for _, h := range hits {
		p := h.Preview
		switch h.Record.Key {
		case "long":
			if !strings.HasPrefix(p, "...") || !strings.HasSuffix(p, "...") || !strings.Contains(p, "the Kubernetes upgrade needs a drain first then more text follows") {
				t.Errorf("long preview %q", p)
			}
			if n := len(strings.TrimSuffix(strings.TrimPrefix(p, "..."), "...")); n > 160 || n < 120 {
				t.Errorf("long preview is %d bytes: %q", n, p)
			}
		case "short":
			if p != "Kubernetes notes." {
				t.Errorf("short preview %q, want the whole body on one line", p)
			}
		}
		if strings.ContainsAny(p, "\n\t") || strings.Contains(p, "  ") || !utf8.ValidString(p) {
			t.Errorf("preview %q is not one clean line", p)
		}
	}
}

// TestNoFullTextTable checks that the full-text table of earlier versions
// is gone once the store opens, and that writes, deletes and purges, which
// used to keep it, work without it.
func TestNoFullTextTable(t *testing.T) {
	s, _ := mustOpen(t)
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE 'records_fts%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d full-text tables remain", n)
	}
	put(t, s, projA, Write{Type: Semantic, Key: "kept", Body: "the canary rollout"})
	put(t, s, projA, Write{Type: Semantic, Key: "kept", Body: "the canary rollout, twice"})
	put(t, s, projA, Write{Type: Semantic, Key: "gone", Body: "the canary rollout, removed"})
	if _, err := s.Delete(ctx, projA, Selector{Key: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "canary rollout"})); !cmp.Equal(got, []string{"kept"}) {
		t.Errorf("search found %v, want [kept]", got)
	}
}

// TestSearchShadowingAfterChurn rewrites and deletes many records of
// names that exist at two levels, after the index is loaded, so that its
// entries' slots are reused, their name chains relinked and their keys
// moved: every name must still show exactly its narrowest record.
func TestSearchShadowingAfterChurn(t *testing.T) {
	s, _ := mustOpen(t)
	const n = 120
	key := func(i int) string { return fmt.Sprintf("a-long-shared-name-of-record-%03d", i) }
	for i := range n {
		put(t, s, projA, Write{Scope: scope.System, Type: Semantic, Key: key(i), Body: fmt.Sprintf("churn alpha%d", i)})
		put(t, s, projA, Write{Type: Semantic, Key: key(i), Body: fmt.Sprintf("churn beta%d round0", i)})
	}
	mustSearch(t, s, projA, SearchOptions{Query: "churn"}) // loads the index
	for round := 1; round <= 3; round++ {
		for i := range n {
			put(t, s, projA, Write{Type: Semantic, Key: key(i), Body: fmt.Sprintf("churn beta%d round%d", i, round)})
		}
	}
	for i := 0; i < n; i += 3 {
		if _, err := s.Delete(ctx, projA, Selector{Key: key(i), Scope: ptrLevel(scope.Project)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		hits := mustSearch(t, s, projA, SearchOptions{Query: fmt.Sprintf("alpha%d beta%d", i, i)})
		want := scope.Project
		if i%3 == 0 {
			want = scope.System
		}
		if len(hits) != 1 || hits[0].Record.Key != key(i) || hits[0].Record.Scope != want {
			t.Fatalf("record %d: %+v, want the %s record alone", i, hits, want)
		}
	}
	if got := mustSearch(t, s, projA, SearchOptions{Query: "round0 round1 round2"}); len(got) != 0 {
		t.Errorf("old versions found: %v", keysOf(got))
	}
	// Without packing, the project's keys would hold every version's.
	if b := s.search.buckets[visibleBuckets(projA.ID)[0]]; b == nil || len(b.keys) >= 3*n*len(key(0)) {
		t.Errorf("the project's keys were never packed")
	}
}

// TestSearchNeighboursKeepFilters: the record written just after a top
// match is raised beside it, but never past the caller's filters, its
// expiry or a narrower record of its name.
func TestSearchNeighboursKeepFilters(t *testing.T) {
	s, c := mustOpen(t)
	ttl := time.Hour
	put(t, s, projA, Write{Scope: scope.System, Type: Semantic, Key: "release-rollback", Body: "rollback the release with the deploy tool, then rollback the flags"})
	put(t, s, projA, Write{Scope: scope.System, Type: Semantic, Key: "flags", Body: "the deploy flags live in one file"})
	put(t, s, projA, Write{Type: Semantic, Key: "flags", Body: "this project keeps no flags"})
	put(t, s, projA, Write{Type: Semantic, Key: "rollback-steps", Body: "rollback steps: rollback the deploy and tell the channel"})
	put(t, s, projA, Write{Type: Working, Key: "scratch", Body: "deploy notes for today", TTL: &ttl})

	all := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "rollback deploy"}))
	if !slices.Contains(all, "scratch") {
		t.Fatalf("the note written beside the project's top match is not found: %v", all)
	}
	for _, h := range mustSearch(t, s, projA, SearchOptions{Query: "rollback deploy"}) {
		if h.Record.Key == "flags" && h.Record.Scope != scope.Project {
			t.Errorf("the system record beside a top match shows past the project's own of its name: %+v", h.Record)
		}
	}
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "rollback deploy", Types: []Type{Semantic}})); slices.Contains(got, "scratch") {
		t.Errorf("types filter: the working note beside a match is found: %v", got)
	}
	c.Add(2 * time.Hour)
	if got := keysOf(mustSearch(t, s, projA, SearchOptions{Query: "rollback deploy"})); slices.Contains(got, "scratch") {
		t.Errorf("expired neighbour found: %v", got)
	}
}
