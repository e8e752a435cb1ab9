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
	if _, ok := h.get(b, 7); ok || h.size != 0 {
		t.Fatalf("a dropped card is kept; size %d", h.size)
	}
}

// TestHitCardsBounded: however many records of however many buckets
// searches find, the cards kept stay within their budget, and the latest
// is kept.
func TestHitCardsBounded(t *testing.T) {
	var h hitCards
	body := strings.Repeat("x", previewKeep)
	buckets := []*bucketIndex{newBucket(), newBucket(), newBucket()}
	for i := range int64(5000) {
		b := buckets[i%3]
		h.keep(b, i, &card{id: fmt.Sprint(i), key: "key", desc: "a description", body: body}, h.generation())
		if h.size > hitCardsBytes {
			t.Fatalf("after %d cards, %d bytes", i+1, h.size)
		}
		if _, ok := h.get(b, i); !ok {
			t.Fatalf("card %d not kept", i)
		}
	}
	sum := 0
	for _, c := range h.cards {
		sum += c.size()
	}
	if sum != h.size || len(h.cards) < 100 {
		t.Fatalf("%d cards of %d bytes, counted %d", len(h.cards), sum, h.size)
	}
	h.keep(buckets[0], -1, &card{body: strings.Repeat("y", hitCardsBytes)}, h.generation())
	if _, ok := h.get(buckets[0], -1); ok {
		t.Fatal("an oversized card is kept")
	}
}

// TestHitsWhileAnotherStoreWrites: searches in one store while another
// store on the same file rewrites the records they find; once the writes
// end, every hit shows its record as it is.
func TestHitsWhileAnotherStoreWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(ctx, path, nil)
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
