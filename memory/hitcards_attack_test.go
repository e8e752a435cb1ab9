package memory

import (
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/scope"
)

// Cards are kept by bucket: a record of project A deleted by another
// store, its rowid then given to a record of project B, shows nothing of
// A's record to B, nor the deleted record to A; and a record rewritten in
// place (same rowid) shows its new text at once.
func TestHitCardsStayInTheirBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	r := openPath(t, path)
	w := openPath(t, path)

	a := put(t, w, projA, Write{Scope: scope.Project, Type: Semantic, Key: "gannet", Description: "secret plan of A", Body: "the gannet dives at dawn, plan of A"})
	hits, err := r.Search(ctx, projA.ID, SearchOptions{Query: "gannet"})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != a.ID {
		t.Fatalf("A's search: %+v %v", hits, err)
	}

	// Rewritten in place.
	put(t, w, projA, Write{Scope: scope.Project, Type: Semantic, Key: "gannet", Description: "plan of A, revised", Body: "the gannet dives at dusk now"})
	hits, err = r.Search(ctx, projA.ID, SearchOptions{Query: "gannet"})
	if err != nil || len(hits) != 1 || hits[0].Record.Description != "plan of A, revised" || !strings.Contains(hits[0].Preview, "dusk") {
		t.Fatalf("A's search after the rewrite: %+v %v", hits, err)
	}

	// Deleted, and its rowid given to B's record.
	if _, err := w.Delete(ctx, projA, Selector{Key: "gannet", Type: Semantic}); err != nil {
		t.Fatal(err)
	}
	b := put(t, w, projB, Write{Scope: scope.Project, Type: Semantic, Key: "gannet", Description: "B's own", Body: "a gannet of B"})
	var ra, rb int64
	if err := w.db.QueryRowContext(ctx, `SELECT (SELECT max(rid) FROM changes WHERE project = ?), (SELECT rowid FROM records WHERE id = ?)`, string(projA.ID), b.ID).Scan(&ra, &rb); err != nil {
		t.Fatal(err)
	}
	if ra != rb {
		t.Logf("rowid not reused (%d, %d): the test shows less", ra, rb)
	}
	hits, err = r.Search(ctx, projB.ID, SearchOptions{Query: "gannet"})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != b.ID || hits[0].Record.Description != "B's own" || strings.Contains(hits[0].Preview, "A") {
		t.Fatalf("B's search: %+v %v", hits, err)
	}
	hits, err = r.Search(ctx, projA.ID, SearchOptions{Query: "gannet"})
	if err != nil || len(hits) != 0 {
		t.Fatalf("A's search after the delete: %+v %v", hits, err)
	}
}

// Another store moves project A's records to project B: A's search, its
// cards warm, shows them no longer, and B's shows them.
func TestHitCardsAfterAProjectMoves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	r := openPath(t, path)
	w := openPath(t, path)
	put(t, w, projA, Write{Scope: scope.Project, Type: Semantic, Key: "kiwi", Body: "the kiwi forages at night"})
	for range 2 {
		if hits, err := r.Search(ctx, projA.ID, SearchOptions{Query: "kiwi"}); err != nil || len(hits) != 1 {
			t.Fatalf("A's search: %+v %v", hits, err)
		}
	}
	if _, err := w.MoveProject(ctx, projA.ID, projB.ID, "/work/b"); err != nil {
		t.Fatal(err)
	}
	if hits, err := r.Search(ctx, projA.ID, SearchOptions{Query: "kiwi"}); err != nil || len(hits) != 0 {
		t.Fatalf("A's search after the move: %+v %v", hits, err)
	}
	if hits, err := r.Search(ctx, projB.ID, SearchOptions{Query: "kiwi"}); err != nil || len(hits) != 1 || !strings.Contains(hits[0].Preview, "forages") {
		t.Fatalf("B's search after the move: %+v %v", hits, err)
	}
}
