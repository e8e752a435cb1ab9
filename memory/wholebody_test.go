package memory

import (
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// A hit whose excerpt needs more of its body than its card keeps reads
// the rest of that record's body, never the body of whatever record holds
// its rowid by then: another store deleting the record and giving its
// rowid to another project's record between a search's ranking and its
// preview must not show that project's text in this one's search.
func TestHitBodyReadIsOfTheSameRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("a race run for a while")
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	r := openPath(t, path)
	w := openPath(t, path)
	pad := strings.Repeat("filler words here. ", 60) // past what a card keeps
	// Written from the writer's goroutine too: errors, not Fatal.
	writeA := func() {
		if _, _, err := w.Put(ctx, projA, Write{Scope: scope.Project, Type: Semantic, Key: "albatross", Body: pad + "the albatross glides, text of A"}); err != nil {
			t.Error(err)
		}
	}
	writeB := func() {
		if _, _, err := w.Put(ctx, projB, Write{Scope: scope.Project, Type: Semantic, Key: "other", Body: pad + "the albatross of project B, PRIVATE-TO-B"}); err != nil {
			t.Error(err)
		}
	}
	writeA()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			// The last rowid goes from A's record to B's and back.
			if _, err := w.Delete(ctx, projA, Selector{Key: "albatross", Type: Semantic}); err != nil {
				t.Error(err)
				return
			}
			writeB()
			if _, err := w.Delete(ctx, projB, Selector{Key: "other", Type: Semantic}); err != nil {
				t.Error(err)
				return
			}
			writeA()
		}
	}()
	var found atomic.Int64
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i, end := 0, time.Now().Add(2*time.Second); time.Now().Before(end) && !t.Failed(); i++ {
				hits, err := r.Search(ctx, projA.ID, SearchOptions{Query: "albatross glides"})
				if err != nil {
					t.Error(err)
					return
				}
				for _, h := range hits {
					found.Add(1)
					if strings.Contains(h.Preview, "PRIVATE-TO-B") {
						t.Errorf("search %d: project A's hit %s shows project B's text: %q", i, h.Record.Key, h.Preview)
					}
				}
			}
		}()
	}
	readers.Wait()
	stop.Store(true)
	wg.Wait()
	t.Logf("%d hits", found.Load())
}
