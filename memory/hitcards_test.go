package memory

import (
	"context"
	"database/sql"
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
	defer h.release()
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
	if _, ok := h.get(b, 7); ok || len(h.slots) != 0 {
		t.Fatalf("a dropped card is kept; %d cards", len(h.slots))
	}
}

// TestHitCardsBounded: however many records of however many buckets
// searches find, the cards kept stay within their budget, the latest is
// kept, and every card kept reads back as written.
func TestHitCardsBounded(t *testing.T) {
	var h hitCards
	defer h.release()
	body := strings.Repeat("x", previewKeep)
	buckets := []*bucketIndex{newBucket(), newBucket(), newBucket()}
	for i := range int64(20000) {
		b := buckets[i%3]
		h.keep(b, i, &card{id: fmt.Sprint(i), key: "key", desc: "a description", body: body}, h.generation())
		if h.bytes() > hitCardsBytes {
			t.Fatalf("after %d cards, %d bytes", i+1, h.bytes())
		}
		if c, ok := h.get(b, i); !ok || c.id != fmt.Sprint(i) {
			t.Fatalf("card %d not kept: %+v", i, c)
		}
	}
	if len(h.slots) < 1000 {
		t.Fatalf("only %d cards kept", len(h.slots))
	}
	for k, s := range h.slots {
		c, _ := h.get(buckets[(k.rowid)%3], k.rowid)
		if c.id != fmt.Sprint(k.rowid) || c.body != body || int(s.n) != c.size() {
			t.Fatalf("card of %d reads back as %+v", k.rowid, c)
		}
	}
	h.keep(buckets[0], -1, &card{body: strings.Repeat("y", hitCardsBytes)}, h.generation())
	if _, ok := h.get(buckets[0], -1); ok {
		t.Fatal("an oversized card is kept")
	}
}

// TestHitCardsAcrossHalves: a card written again after its half filled
// lives on when that half is emptied; one not written again goes; every
// field reads back as it was written.
func TestHitCardsAcrossHalves(t *testing.T) {
	var h hitCards
	defer h.release()
	b := newBucket()
	want := card{id: "01HZX", typ: "semantic", key: "kühl-出口", desc: "Ünïcode déscription", body: "Body\x00 with a NUL and 日本語",
		bodyLen: 9000, scope: 3, expires: sql.NullInt64{Int64: -12345, Valid: true}}
	h.keep(b, 1, &want, h.generation())
	h.keep(b, 2, &card{id: "two"}, h.generation())
	filler := strings.Repeat("f", 20000)
	i := int64(100)
	for h.cur == 0 {
		h.keep(b, i, &card{id: "filler", body: filler}, h.generation())
		i++
	}
	h.keep(b, 1, &want, h.generation()) // now in the second half
	for h.cur == 1 {
		h.keep(b, i, &card{id: "filler", body: filler}, h.generation())
		i++
	}
	// The first half was emptied to be written again.
	got, ok := h.get(b, 1)
	if !ok || *got != want {
		t.Fatalf("card 1 = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := h.get(b, 2); ok {
		t.Fatal("a card of the emptied half is still found")
	}
	h.release()
	if _, ok := h.get(b, 1); ok {
		t.Fatal("a card is found after release")
	}
	h.keep(b, 3, &want, h.generation())
	if _, ok := h.get(b, 3); ok || h.bytes() != 0 {
		t.Fatal("a card is kept after release")
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

// TestSearchWhileClosing: searches running while their store closes, and
// searches after it, get answers or errors, never another record's text
// and never a read of the cards' released room.
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
