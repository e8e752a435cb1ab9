package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// clock is an injected, settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustOpen(tb testing.TB) (*Store, *clock) {
	tb.Helper()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s, err := openTarget(context.Background(), filepath.Join(tb.TempDir(), "db", "memory.db"), &Options{Now: c.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, c
}

var (
	projA = Project{ID: scope.IdentityOf("/work/a")}
	projB = Project{ID: scope.IdentityOf("/work/b")}
	ctx   = context.Background()
)

func put(tb testing.TB, s *Store, p Project, w Write) Record {
	tb.Helper()
	r, _, err := s.Put(ctx, p, w)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestOpenModesAndTwice(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "memory.db")
	s1, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	put(t, s1, projA, Write{Type: Semantic, Key: "k", Body: "b"})
	s2, err := openTarget(ctx, path, nil) // migrations run again, safely
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Get(ctx, projA.ID, Selector{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{filepath.Dir(path): 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %v, want %v", p, got, want)
		}
	}
}

func TestOpenOlderSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	// Build a database as the first release did: only migration 1.
	s := &Store{now: time.Now, path: path}
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	if err := migrateTo(s.db, names, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO records (id, project, scope, type, key, body, created_at, updated_at) VALUES ('01OLD', '', 3, 'semantic', 'old-fact', 'kept across upgrades', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO records_fts (rowid, key, body) SELECT rowid, key, body FROM records`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	st, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(ctx, projA.ID, Selector{Key: "old-fact"})
	if err != nil || r.Body != "kept across upgrades" {
		t.Fatalf("Get = %+v, %v", r, err)
	}
	var v int
	st.db.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion() {
		t.Errorf("user_version = %d, want %d", v, SchemaVersion())
	}
}

func TestOpenNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Exec("PRAGMA user_version = 99")
	s.Close()
	if _, err := openTarget(ctx, path, nil); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open = %v, want a newer-schema error", err)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	junk := []byte(strings.Repeat("this is not sqlite\n", 400))
	os.WriteFile(path, junk, 0o600)
	_, err := openTarget(ctx, path, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v, want an error naming the path", err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != string(junk) {
		t.Error("the file was changed")
	}
}

func TestScopeChain(t *testing.T) {
	s, _ := mustOpen(t)
	sys := put(t, s, projA, Write{Scope: scope.System, Type: Semantic, Key: "test-runner", Body: "use go test"})
	proj := put(t, s, projA, Write{Scope: scope.Project, Type: Semantic, Key: "test-runner", Body: "use make test"})

	get := func(p Project) string {
		t.Helper()
		r, err := s.Get(ctx, p.ID, Selector{Key: "test-runner"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Body
	}
	if got := get(projA); got != "use make test" {
		t.Errorf("project A reads %q", got)
	}
	if got := get(projB); got != "use go test" {
		t.Errorf("project B reads %q", got)
	}
	rs, _, err := s.List(ctx, projA.ID, ListOptions{})
	if err != nil || len(rs) != 1 || rs[0].ID != proj.ID || rs[0].Body != "" {
		t.Fatalf("List = %+v, %v", rs, err)
	}
	if _, err := s.Delete(ctx, projA, Selector{Key: "test-runner"}); err != nil {
		t.Fatal(err)
	}
	if got := get(projA); got != "use go test" {
		t.Errorf("after delete project A reads %q", got)
	}
	r, err := s.Get(ctx, projA.ID, Selector{Key: "test-runner", Scope: ptrLevel(scope.System)})
	if err != nil || r.ID != sys.ID {
		t.Fatalf("Get system = %+v, %v", r, err)
	}
}

func ptrLevel(l scope.Level) *scope.Level { return &l }

func TestProjectsIsolated(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "secret-sauce", Body: "only for A"})
	if _, err := s.Get(ctx, projB.ID, Selector{Key: "secret-sauce"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("B sees A's record: %v", err)
	}
	if hits, err := s.Search(ctx, projB.ID, SearchOptions{Query: "sauce"}); err != nil || len(hits) != 0 {
		t.Fatalf("B searches A's record: %v %v", hits, err)
	}
}

func TestPutUpsertKeepsIdentity(t *testing.T) {
	s, c := mustOpen(t)
	r1, created, err := s.Put(ctx, projA, Write{Type: Semantic, Key: "Build Tool", Body: "make"})
	if err != nil || !created || r1.Key != "build-tool" {
		t.Fatalf("Put = %+v %v %v", r1, created, err)
	}
	c.Add(time.Minute)
	r2, created, err := s.Put(ctx, projA, Write{Type: Semantic, Key: "build-tool", Body: "make"})
	if err != nil || created || r2.ID != r1.ID || !r2.UpdatedAt.Equal(r1.UpdatedAt) {
		t.Fatalf("unchanged Put = %+v %v %v", r2, created, err)
	}
	r3, _, err := s.Put(ctx, projA, Write{Type: Semantic, Key: "build-tool", Body: "bazel"})
	if err != nil || r3.ID != r1.ID || !r3.UpdatedAt.After(r1.UpdatedAt) || !r3.CreatedAt.Equal(r1.CreatedAt) {
		t.Fatalf("changed Put = %+v %v", r3, err)
	}
}

func TestValidation(t *testing.T) {
	s, _ := mustOpen(t)
	ok := Write{Type: Semantic, Key: "k", Body: "b"}
	bad := func(v float64) *float64 { return &v }
	cases := []struct {
		name  string
		w     Write
		code  Code
		field string
	}{
		{"unknown type", Write{Type: "fact", Key: "k", Body: "b"}, CodeInvalidArgument, "type"},
		{"unknown scope", Write{Scope: 9, Type: Semantic, Key: "k", Body: "b"}, CodeInvalidArgument, "scope"},
		{"bad key", Write{Type: Semantic, Key: "../etc/passwd", Body: "b"}, CodeInvalidArgument, "key"},
		{"key with colon", Write{Type: Semantic, Key: "c:con", Body: "b"}, CodeInvalidArgument, "key"},
		{"long key", Write{Type: Semantic, Key: strings.Repeat("k", 101), Body: "b"}, CodeInvalidArgument, "key"},
		{"empty body", Write{Type: Semantic, Key: "k", Body: "  \n"}, CodeInvalidArgument, "body"},
		{"huge body", Write{Type: Semantic, Key: "k", Body: strings.Repeat("x", MaxBodyBytes+1)}, CodeTooLarge, "body"},
		{"confidence", Write{Type: Semantic, Key: "k", Body: "b", Confidence: bad(1.5)}, CodeInvalidArgument, "confidence"},
		{"negative confidence", Write{Type: Semantic, Key: "k", Body: "b", Confidence: bad(-0.1)}, CodeInvalidArgument, "confidence"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Put(ctx, projA, tc.w)
			var me *Error
			if !errors.As(err, &me) || me.Code != tc.code || me.Field != tc.field {
				t.Fatalf("Put = %v, want %s on %s", err, tc.code, tc.field)
			}
		})
	}
	if rs, _, _ := s.List(ctx, projA.ID, ListOptions{}); len(rs) != 0 {
		t.Fatalf("bad writes left %d records", len(rs))
	}
	put(t, s, projA, ok)
}

func TestExpiry(t *testing.T) {
	s, c := mustOpen(t)
	put(t, s, projA, Write{Type: Working, Key: "scratch", Body: "note"})
	ttl := 10 * time.Second
	put(t, s, projA, Write{Type: Semantic, Key: "brief", Body: "fact", TTL: &ttl})
	put(t, s, projA, Write{Type: Semantic, Key: "forever", Body: "fact"})
	c.Add(11 * time.Second)
	if _, err := s.Get(ctx, projA.ID, Selector{Key: "brief"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired record visible: %v", err)
	}
	c.Add(24 * time.Hour)
	if _, err := s.Get(ctx, projA.ID, Selector{Key: "scratch"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("working record visible after 24h: %v", err)
	}
	n, err := s.Purge(ctx)
	if err != nil || n != 1 {
		t.Errorf("Purge = %d, %v; want 1 (the working record)", n, err)
	}
	// The expired fact is mirrored: it goes with its file.
	m, err := s.PurgeMirrored(ctx, projA)
	if err != nil || m != 1 {
		t.Errorf("PurgeMirrored = %d, %v; want 1", m, err)
	}
	if _, err := s.Get(ctx, projA.ID, Selector{Key: "forever"}); err != nil {
		t.Error(err)
	}
}

func TestKeyAcrossTypesConflicts(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Working, Key: "deploy", Body: "a"})
	put(t, s, projA, Write{Type: Semantic, Key: "deploy", Body: "b"})
	_, err := s.Get(ctx, projA.ID, Selector{Key: "deploy"})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "semantic") {
		t.Fatalf("Get = %v, want conflict naming the types", err)
	}
	if _, _, err := s.Put(ctx, projA, Write{Type: Procedural, Key: "deploy", Body: "c"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("procedural over semantic project key = %v, want conflict", err)
	}
}

func TestUpdateAndNotFound(t *testing.T) {
	s, _ := mustOpen(t)
	if _, err := s.Update(ctx, projA, Selector{Key: "missing"}, Patch{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Update missing = %v", err)
	}
	put(t, s, projA, Write{Type: Semantic, Key: "k", Body: "one", Tags: []string{"a"}})
	body := "two"
	r, err := s.Update(ctx, projA, Selector{Key: "k"}, Patch{Body: &body})
	if err != nil || r.Body != "two" || len(r.Tags) != 1 {
		t.Fatalf("Update = %+v, %v", r, err)
	}
}

func TestSearchRanksRareWords(t *testing.T) {
	s, _ := mustOpen(t)
	for i := 0; i < 20; i++ {
		put(t, s, projA, Write{Type: Semantic, Key: fmt.Sprintf("filler-%d", i), Body: "the project uses go and tests run in ci"})
	}
	put(t, s, projA, Write{Type: Semantic, Key: "migrations", Body: "Database migrations are applied with goose before the tests run."})
	put(t, s, projA, Write{Type: Semantic, Key: "deploys", Body: "Deploys go through the staging cluster."})
	hits, err := s.Search(ctx, projA.ID, SearchOptions{Query: "how are the database migrations applied?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].Record.Key != "migrations" {
		t.Fatalf("top hit = %+v", hits)
	}
	if hits[0].Score <= 0 || hits[0].Score > 1 || hits[0].Record.Body != "" || !strings.Contains(hits[0].Preview, "migrations") {
		t.Errorf("hit = %+v", hits[0])
	}
	hits, err = s.Search(ctx, projA.ID, SearchOptions{Query: "database migrations", Bodies: true})
	if err != nil || len(hits) == 0 || hits[0].Record.Body != "Database migrations are applied with goose before the tests run." {
		t.Fatalf("search with bodies = %+v %v", hits, err)
	}
	// Stemming: "deploying" finds "Deploys".
	hits, err = s.Search(ctx, projA.ID, SearchOptions{Query: "deploying"})
	if err != nil || len(hits) != 1 || hits[0].Record.Key != "deploys" {
		t.Fatalf("stemmed search = %+v %v", hits, err)
	}
	if _, err := s.Search(ctx, projA.ID, SearchOptions{Query: "the and of"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("stop-word query = %v", err)
	}
}

func TestListPaging(t *testing.T) {
	s, _ := mustOpen(t)
	for i := 0; i < 7; i++ {
		put(t, s, projA, Write{Type: Semantic, Key: fmt.Sprintf("k%02d", i), Body: "b", Tags: []string{fmt.Sprint("t", i%2)}})
	}
	var keys []string
	cursor := ""
	for {
		rs, next, err := s.List(ctx, projA.ID, ListOptions{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			keys = append(keys, r.Key)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(keys) != 7 || keys[0] != "k00" || keys[6] != "k06" {
		t.Fatalf("paged keys = %v", keys)
	}
	rs, _, _ := s.List(ctx, projA.ID, ListOptions{Tag: "t1"})
	if len(rs) != 3 {
		t.Errorf("tag filter gave %d", len(rs))
	}
	if _, _, err := s.List(ctx, projA.ID, ListOptions{Cursor: "!!"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad cursor = %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := openTarget(ctx, path, nil)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for i := 0; i < 25; i++ {
				if _, _, err := s.Put(ctx, projA, Write{Type: Semantic, Key: fmt.Sprintf("w%d-%d", w, i%5), Body: fmt.Sprint(i)}); err != nil {
					errs <- err
					return
				}
				if _, err := s.Search(ctx, projA.ID, SearchOptions{Query: "w0"}); err != nil && !errors.Is(err, ErrInvalidArgument) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s, _ := openTarget(ctx, path, nil)
	defer s.Close()
	rs, _, _ := s.List(ctx, projA.ID, ListOptions{Limit: 500})
	if len(rs) != 20 {
		t.Errorf("records = %d, want 20", len(rs))
	}
}

func TestCapture(t *testing.T) {
	s, _ := mustOpen(t)
	c1 := Capture{SessionID: "s1", Plan: "fix", Statements: []string{"Always run make lint."},
		Sequences: []Sequence{{Steps: []string{"make build", "make test"}, Succeeded: true}, {Name: "bad", Steps: []string{"rm -rf x"}}}}
	res, err := s.Capture(ctx, projA, c1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pending) != 1 || len(res.Promoted) != 0 || len(res.Procedures) != 1 || res.Procedures[0].UseCount != 1 {
		t.Fatalf("first capture = %+v", res)
	}
	again, err := s.Capture(ctx, projA, c1, 2)
	if err != nil || !again.Replaced || len(again.Pending) != 1 || again.Procedures[0].UseCount != 1 {
		t.Fatalf("re-capture = %+v %v", again, err)
	}
	c2 := Capture{SessionID: "s2", Statements: []string{"always run make lint"},
		Sequences: []Sequence{{Steps: []string{"make build", "make test"}, Succeeded: true}}}
	res, err = s.Capture(ctx, projA, c2, 2)
	if err != nil || len(res.Promoted) != 1 || res.Procedures[0].UseCount != 2 {
		t.Fatalf("second session = %+v %v", res, err)
	}
	first := res.Promoted[0].Confidence
	res, err = s.Capture(ctx, projA, Capture{SessionID: "s3", Statements: []string{"ALWAYS run make  lint!"}}, 2)
	if err != nil || len(res.Promoted) != 1 || res.Promoted[0].Confidence <= first {
		t.Fatalf("third session = %+v %v", res, err)
	}
	rs, _, _ := s.List(ctx, projA.ID, ListOptions{Type: Semantic})
	if len(rs) != 1 {
		t.Fatalf("facts = %d, want 1", len(rs))
	}
	if _, err := s.Get(ctx, projA.ID, Selector{Key: "bad", Type: Procedural}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed sequence was learned: %v", err)
	}
}

func TestCaptureStrengthensHandWrittenFact(t *testing.T) {
	s, _ := mustOpen(t)
	hand := put(t, s, projA, Write{Type: Semantic, Key: "lint-rule", Body: "Always run make lint."})
	res, err := s.Capture(ctx, projA, Capture{SessionID: "s1", Statements: []string{"always run make lint"}}, 2)
	if err != nil || len(res.Promoted) != 1 || res.Promoted[0].ID != hand.ID || res.Promoted[0].Confidence <= hand.Confidence {
		t.Fatalf("capture = %+v %v", res, err)
	}
}

func TestSearchTypes(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "fact", Body: "kafka topics are made by terraform"})
	put(t, s, projA, Write{Type: Procedural, Key: "how", Body: "1. terraform apply for kafka"})
	put(t, s, projA, Write{Type: Episodic, Key: "s1", Body: "we talked about kafka"})
	hits, err := s.Search(ctx, projA.ID, SearchOptions{Query: "kafka", Types: []Type{Semantic, Procedural}})
	if err != nil || len(hits) != 2 {
		t.Fatalf("Search = %+v, %v; want the fact and the procedure", hits, err)
	}
	for _, h := range hits {
		if h.Record.Type == Episodic {
			t.Errorf("an episodic record passed the types filter")
		}
	}
}
