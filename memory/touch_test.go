package memory

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// openAt opens the database at path with clock c, closed at the end of
// the test unless the test closes it first.
func openAt(tb testing.TB, path string, c *clock) *Store {
	tb.Helper()
	s, err := openTarget(ctx, path, &Options{Now: c.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// openPath opens the database at path, closed at the end of the test.
func openPath(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func uses(tb testing.TB, s *Store, key string) (int64, *time.Time) {
	tb.Helper()
	r, err := s.Peek(ctx, projA.ID, Selector{Key: key, Type: Semantic})
	if err != nil {
		tb.Fatal(err)
	}
	return r.UseCount, r.LastAccessedAt
}

func get(tb testing.TB, s *Store, key string) Record {
	tb.Helper()
	r, err := s.Get(ctx, projA.ID, Selector{Key: key, Type: Semantic})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestUsesSurviveCleanClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := openAt(t, path, c)
	put(t, s, projA, Write{Scope: scope.Project, Type: Semantic, Key: "k", Body: "b"})
	for i := 1; i <= 3; i++ {
		c.Add(time.Minute)
		if r := get(t, s, "k"); r.UseCount != int64(i) || !r.LastAccessedAt.Equal(c.Now()) {
			t.Fatalf("read %d returned use_count %d, last access %v", i, r.UseCount, r.LastAccessedAt)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n, at := uses(t, openAt(t, path, c), "k")
	if n != 3 || at == nil || !at.Equal(c.Now()) {
		t.Fatalf("after a clean close: use_count %d, last access %v; want 3, %v", n, at, c.Now())
	}
}

func TestUsesOfTwoProcessesAddUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	a, b := openAt(t, path, c), openAt(t, path, c)
	put(t, a, projA, Write{Scope: scope.Project, Type: Semantic, Key: "k", Body: "b"})
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					get(t, s, "k")
				}
			}()
		}
	}
	wg.Wait()
	// One of them writes something meanwhile: its uses go in with it.
	put(t, b, projA, Write{Scope: scope.Project, Type: Semantic, Key: "k", Body: "changed"})
	if n, _ := uses(t, a, "k"); n < 100 {
		t.Errorf("after b's write, stored use_count = %d; want at least b's 100", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := uses(t, openAt(t, path, c), "k"); n != 200 {
		t.Fatalf("use_count = %d; want 200 (100 reads in each of two stores)", n)
	}
}

func TestListAndRecallOrderSeePendingUses(t *testing.T) {
	s, _ := mustOpen(t)
	for _, k := range []string{"a", "b"} {
		put(t, s, projA, Write{Scope: scope.Project, Type: Procedural, Key: k, Body: "steps " + k})
	}
	for range 3 {
		if _, err := s.Get(ctx, projA.ID, Selector{Key: "b", Type: Procedural}); err != nil {
			t.Fatal(err)
		}
	}
	rows, _, err := s.List(ctx, projA.ID, ListOptions{Type: Procedural})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if want := map[string]int64{"a": 0, "b": 3}[r.Key]; r.UseCount != want {
			t.Errorf("list: %s use_count = %d; want %d", r.Key, r.UseCount, want)
		}
	}
	// Procedures are woven most used first.
	recs, err := s.Effective(ctx, projA.ID, []Type{Procedural}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Key != "b" {
		t.Errorf("effective order = %v; want b first", keys(recs))
	}
	if err := s.Touch(ctx, []string{recs[1].ID, recs[1].ID}); err != nil {
		t.Fatal(err)
	}
	rows, _, _ = s.List(ctx, projA.ID, ListOptions{Type: Procedural, Tag: ""})
	for _, r := range rows {
		if want := map[string]int64{"a": 2, "b": 3}[r.Key]; r.UseCount != want {
			t.Errorf("after touching a twice: %s use_count = %d; want %d", r.Key, r.UseCount, want)
		}
	}
}

func TestUsesWrittenWithoutClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s, other := openAt(t, path, c), openAt(t, path, c)
	put(t, s, projA, Write{Scope: scope.Project, Type: Semantic, Key: "k", Body: "b"})
	get(t, s, "k")
	// The timer writes them for the other process to see.
	deadline := time.Now().Add(10 * touchDelay)
	for {
		if n, _ := uses(t, other, "k"); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the use never reached the database")
		}
		time.Sleep(touchDelay / 10)
	}
}

func TestUsesOfDeletedRecordAreDropped(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Scope: scope.Project, Type: Semantic, Key: "k", Body: "b"})
	get(t, s, "k")
	if _, err := s.Delete(ctx, projA, Selector{Key: "k", Type: Semantic}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	put(t, s, projA, Write{Scope: scope.Project, Type: Semantic, Key: "k", Body: "b"})
	if n, _ := uses(t, s, "k"); n != 0 {
		t.Errorf("a new record under the deleted one's key has use_count %d", n)
	}
}

func keys(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}
