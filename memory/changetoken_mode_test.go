package memory

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Another process tries to take the database out of WAL mode and then
// writes: while this process has it open, SQLite keeps it in WAL mode
// (leaving it needs the only hold on the file), so the write still moves
// the log index header and this process sees it at once.
func TestChangeTokenWhileAnotherLeavesWAL(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_MODE_DB"); path != "" {
		db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=2000")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var mode string
		err = db.QueryRow(`PRAGMA journal_mode=DELETE`).Scan(&mode)
		t.Logf("journal_mode=DELETE: %q %v", mode, err)
		if _, err := db.Exec(`UPDATE records SET body = 'a changed wombat', updated_at = updated_at + 1 WHERE key = 'wombat'`); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openPath(t, path)
	put(t, s, projA, Write{Type: Semantic, Key: "wombat", Body: "a wombat"})
	if hits, err := s.Search(ctx, projA.ID, SearchOptions{Query: "changed"}); err != nil || len(hits) != 0 {
		t.Fatalf("%+v %v", hits, err)
	}
	if _, ok := s.changeToken(ctx); !ok {
		t.Fatal("no change token")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChangeTokenWhileAnotherLeavesWAL$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "MEMORY_TEST_MODE_DB="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("other process: %v\n%s", err, out)
	}
	t.Logf("other process:\n%s", out)
	if hits, err := s.Search(ctx, projA.ID, SearchOptions{Query: "changed"}); err != nil || len(hits) != 1 {
		t.Fatalf("the other process's write is not seen: %+v %v", hits, err)
	}
}

// Two Stores of one process on one file share SQLite's mapping of the log
// index: one closing leaves the other's view whole, and a write by a
// third is still seen by the one left.
func TestChangeTokenAfterAnotherStoreCloses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	open := func() *Store {
		s, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2 := open(), open()
	defer s2.Close()
	if _, ok := s1.changeToken(ctx); !ok {
		t.Fatal("no change token")
	}
	if hits, err := s2.Search(ctx, projA.ID, SearchOptions{Query: "dingo"}); err != nil || len(hits) != 0 {
		t.Fatalf("%+v %v", hits, err)
	}
	before, ok := s2.changeToken(ctx)
	if !ok {
		t.Fatal("no change token")
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if now, ok := s2.changeToken(ctx); !ok || now != before {
		t.Fatalf("the token moved or went with the other store's close: %v %v", now, ok)
	}
	s3 := open()
	put(t, s3, projA, Write{Type: Semantic, Key: "dingo", Body: "a dingo"})
	s3.Close()
	if now, ok := s2.changeToken(ctx); !ok || now == before {
		t.Fatalf("the token did not move with a write: %v %v", now, ok)
	}
	if hits, err := s2.Search(ctx, projA.ID, SearchOptions{Query: "dingo"}); err != nil || len(hits) != 1 {
		t.Fatalf("the write is not seen: %+v %v", hits, err)
	}
}
