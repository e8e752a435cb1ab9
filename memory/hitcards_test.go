package memory

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"prom.codes/memory-mcp/scope"
)

// TestHitCardsReadBeforeADropNotKept: a card read before a change to its
// record was applied is not kept, and one read after is.
func TestHitCardsReadBeforeADropNotKept(t *testing.T) {
	var h hitCards
	b, other := newBucket(), newBucket()
	gen := h.generation()
	h.drop(b, 7) // the record changed while its row was being read
	h.keep(b, 7, &card{id: "old"}, gen)
	if _, ok := h.get(b, 7); ok {
		t.Fatal("a card read before a change is kept")
	}
	h.keep(b, 7, &card{id: "new"}, h.generation())
	if c, ok := h.get(b, 7); !ok || c.id != "new" {
		t.Fatalf("card = %+v, %v", c, ok)
	}
	if _, ok := h.get(other, 7); ok {
		t.Fatal("a card is found under another bucket")
	}
	h.drop(other, 7)
	if _, ok := h.get(b, 7); !ok {
		t.Fatal("a change in another bucket dropped the card")
	}
	h.drop(b, 7)
	if _, ok := h.get(b, 7); ok || len(h.cards) != 0 {
		t.Fatalf("a dropped card is kept; %d cards", len(h.cards))
	}
}

// TestHitCardsBounded: however many records of however many buckets
// searches find, the cards kept stay within their bound and the latest is
// kept.
func TestHitCardsBounded(t *testing.T) {
	var h hitCards
	body := strings.Repeat("x", previewKeep)
	buckets := []*bucketIndex{newBucket(), newBucket(), newBucket()}
	for i := range int64(20000) {
		b := buckets[i%3]
		h.keep(b, i, &card{id: fmt.Sprint(i), key: "key", desc: "a description", body: body}, h.generation())
		if len(h.cards) > hitCardsMax {
			t.Fatalf("after %d cards, %d kept", i+1, len(h.cards))
		}
		if c, ok := h.get(b, i); !ok || c.id != fmt.Sprint(i) {
			t.Fatalf("card %d not kept: %+v", i, c)
		}
	}
}

// TestHitsWhileAnotherStoreWrites: searches in one store while another
// store on the same file rewrites the records they find; once the writes
// end, every hit shows its record as it is.
func TestHitsWhileAnotherStoreWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	ctx := context.Background()
	open := func() *Store {
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	w, r := open(), open()
	write := func(i, round int) {
		put(t, w, projA, Write{Scope: scope.Project, Type: Semantic, Key: fmt.Sprintf("heron-%d", i),
			Description: fmt.Sprintf("round %d", round), Body: fmt.Sprintf("The heron waits, round %d. ", round) + strings.Repeat("Reeds and water. ", 60)})
	}
	for i := range 8 {
		write(i, 0)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; round <= 30; round++ {
			for i := range 8 {
				write(i, round)
			}
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				if _, err := r.Search(ctx, projA.ID, SearchOptions{Query: "heron waits"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	hits, err := r.Search(ctx, projA.ID, SearchOptions{Query: "heron waits"})
	if err != nil || len(hits) != 8 {
		t.Fatalf("hits = %+v, %v", hits, err)
	}
	for _, h := range hits {
		if h.Record.Description != "round 30" || !strings.HasPrefix(h.Preview, "The heron waits, round 30.") {
			t.Errorf("%s shows %q, %q", h.Record.Key, h.Record.Description, h.Preview)
		}
	}
}

// TestSearchWhileClosing: searches running while their store closes, and
// searches after it, get answers or errors, never another record's text.
func TestSearchWhileClosing(t *testing.T) {
	s := openPath(t, filepath.Join(t.TempDir(), "memory.db"))
	for i := range 40 {
		put(t, s, projA, Write{Scope: scope.Project, Type: Semantic, Key: fmt.Sprintf("heron-%d", i), Body: fmt.Sprintf("The heron %d waits by the reeds.", i)})
	}
	if _, err := s.Search(context.Background(), projA.ID, SearchOptions{Query: "heron reeds", Limit: 40}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				hits, err := s.Search(context.Background(), projA.ID, SearchOptions{Query: "heron reeds", Limit: 40})
				if err != nil {
					return
				}
				for _, h := range hits {
					var n int
					if _, err := fmt.Sscanf(h.Record.Key, "heron-%d", &n); err != nil || !strings.Contains(h.Preview, fmt.Sprintf("heron %d ", n)) {
						t.Errorf("hit %s shows %q", h.Record.Key, h.Preview)
						return
					}
				}
			}
		})
	}
	s.Close()
	wg.Wait()
	if _, err := s.Search(context.Background(), projA.ID, SearchOptions{Query: "heron"}); err == nil {
		t.Error("a search of a closed store succeeded")
	}
}
