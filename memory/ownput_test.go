package memory

import (
	"database/sql"
	"path/filepath"
	"testing"

	"prom.codes/memory-mcp/scope"
)

// otherFile records a file state for p in a transaction of its own, as
// another process's write of a fact does.
func otherFile(tb testing.TB, s *Store, p scope.Identity, stem string) {
	tb.Helper()
	if err := s.tx(ctx, func(tx *sql.Tx) error {
		return setFileState(ctx, tx, p, FileState{Stem: stem, Size: 3, MTime: 1, Hash: "h-" + stem, ID: "id-" + stem})
	}); err != nil {
		tb.Fatal(err)
	}
}

// twoStoresSeen opens two stores on one new database file, as two
// processes do, and has the first look at projA's mirror state; it
// returns the version seen.
func twoStoresSeen(t *testing.T) (a, b *Store, v0 int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memory.db")
	a, b = openPath(t, path), openPath(t, path)
	seen, err := a.MirrorChangesSince(ctx, projA.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, seen.Version
}

// sawTheirs fails t with msg unless a is told, since v0, of the file
// state "theirs" that otherFile recorded, and of nothing after it.
func sawTheirs(t *testing.T, a *Store, v0 int64, msg string) {
	t.Helper()
	ch, err := a.MirrorChangesSince(ctx, projA.ID, v0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ch.Changed["theirs"]; !ok || ch.Version != v0+1 {
		t.Fatalf("%s: %+v", msg, ch)
	}
}

// A Put's own commit spares the next look at the mirror state only if it
// was the one commit since the last: another process committing the
// instant after it, before the Put reads the log index again, is seen.
func TestOwnPutThenAnotherCommitIsNotMissed(t *testing.T) {
	a, b, v0 := twoStoresSeen(t)
	p := projA.ID

	// Alone, the Put's commit moves the token and the state is still
	// known without a look: what was seen is kept at the new token.
	put(t, a, projA, Write{Scope: scope.Project, Type: Working, Key: "note-1", Body: "A note."})
	tok, ok := a.changeToken(ctx)
	if !ok {
		t.Skip("the log index cannot be read here")
	}
	if v := a.seen.at(p, tok); v != v0 {
		t.Fatalf("after the Put alone, the state at the new token is %d, want %d (still known)", v, v0)
	}
	if ch, err := a.MirrorChangesSince(ctx, p, v0); err != nil || ch.Version != v0 || len(ch.Changed)+len(ch.Gone) != 0 {
		t.Fatalf("after a note: %+v, %v; want nothing changed", ch, err)
	}

	// Another process commits right after the Put's commit.
	a.afterCommit = func() {
		a.afterCommit = nil
		otherFile(t, b, p, "theirs")
	}
	put(t, a, projA, Write{Scope: scope.Project, Type: Working, Key: "note-2", Body: "Another note."})
	sawTheirs(t, a, v0, "the other process's file state, committed right after the Put, was missed")
}

// The version read back before the commit must have moved by one for each
// file state the Put noted; any other change to the mirror state in the
// same transaction leaves the next look to the database.
func TestOwnPutVersionMustAddUp(t *testing.T) {
	a, _, v0 := twoStoresSeen(t)
	p := projA.ID
	if err := a.tx(ctx, func(tx *sql.Tx) error {
		a.armOwnPut(ctx, p)
		if !a.ownPut.armed {
			t.Skip("the log index cannot be read here")
		}
		if err := a.setFileState(ctx, tx, p, FileState{Stem: "noted", Size: 1, Hash: "h", ID: "id-noted"}); err != nil {
			return err
		}
		// Not through the Put: not noted.
		if err := setFileState(ctx, tx, p, FileState{Stem: "unnoted", Size: 1, Hash: "h", ID: "id-unnoted"}); err != nil {
			return err
		}
		a.checkOwnPut(ctx, tx)
		if !a.ownPut.spoilt {
			t.Errorf("version %d after one noted state on %d: not refused", a.ownPut.v1, v0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ch, err := a.MirrorChangesSince(ctx, p, v0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Changed) != 2 || ch.Version != v0+2 {
		t.Fatalf("want both states and version %d: %+v", v0+2, ch)
	}

	// A state noted for another project spoils it too.
	if err := a.tx(ctx, func(tx *sql.Tx) error {
		a.armOwnPut(ctx, p)
		if err := a.setFileState(ctx, tx, projB.ID, FileState{Stem: "elsewhere", Size: 1, Hash: "h", ID: "id-elsewhere"}); err != nil {
			return err
		}
		if !a.ownPut.spoilt {
			t.Error("a state of another project did not spoil the Put's")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint that empties the log rewrites the log index header without
// a commit: run the instant after a Put's commit, alone or around another
// process's commit, the answers stay the database's.
func TestOwnPutAcrossACheckpoint(t *testing.T) {
	a, b, v0 := twoStoresSeen(t)
	p := projA.ID
	truncate := func() {
		var busy, frames, done int
		if err := b.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
			t.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
	}
	a.afterCommit = func() { a.afterCommit = nil; truncate() }
	put(t, a, projA, Write{Scope: scope.Project, Type: Working, Key: "note-1", Body: "A note."})
	// The checkpoint made no commit: the state is still known.
	if tok, ok := a.changeToken(ctx); !ok || a.seen.at(p, tok) != v0 {
		t.Fatalf("after a note and a checkpoint, the state at the new token is %d, want %d", a.seen.at(p, tok), v0)
	}
	if ch, err := a.MirrorChangesSince(ctx, p, v0); err != nil || ch.Version != v0 || len(ch.Changed)+len(ch.Gone) != 0 {
		t.Fatalf("after a note and a checkpoint: %+v, %v; want nothing changed", ch, err)
	}
	a.afterCommit = func() {
		a.afterCommit = nil
		truncate()
		otherFile(t, b, p, "theirs")
		truncate()
	}
	put(t, a, projA, Write{Scope: scope.Project, Type: Working, Key: "note-2", Body: "Another note."})
	sawTheirs(t, a, v0, "another process's commit between two checkpoints was missed")
}
