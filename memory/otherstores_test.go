package memory

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"prom.codes/memory-mcp/scope"
)

// Another Store on the same file (another process, as far as SQLite is
// concerned) writes while this one's caches are warm: the very next
// MirrorChangesSince and Search see its write, and one with nothing new
// written meanwhile finds nothing changed.
func TestSeesOtherStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s1 := openPath(t, path)
	s2 := openPath(t, path)
	p := projA.ID

	seen, err := s1.MirrorChangesSince(ctx, p, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Search(ctx, p, SearchOptions{Query: "zebra"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ch, err := s1.MirrorChangesSince(ctx, p, seen.Version)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Version != seen.Version || len(ch.Changed) != 0 || len(ch.Gone) != 0 {
			t.Fatalf("round %d: nothing written, yet changes: %+v", i, ch)
		}
		hits, err := s1.Search(ctx, p, SearchOptions{Query: "zebra"})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != i {
			t.Fatalf("round %d: %d hits before the write, want %d", i, len(hits), i)
		}

		key := []string{"zebra-a", "zebra-b", "zebra-c"}[i]
		if _, err := s2.Import(ctx, p, Record{Type: Semantic, Key: key, Body: "a zebra"}, FileState{Stem: key, Hash: "h" + key}, nil, nil); err != nil {
			t.Fatal(err)
		}
		ch, err = s1.MirrorChangesSince(ctx, p, seen.Version)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Version == seen.Version {
			t.Fatalf("round %d: the other store's import is not seen", i)
		}
		if _, ok := ch.Changed[key]; !ok || len(ch.Changed) != 1 {
			t.Fatalf("round %d: changed %v, want only %s", i, ch.Changed, key)
		}
		seen = ch
		hits, err = s1.Search(ctx, p, SearchOptions{Query: "zebra"})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != i+1 {
			t.Fatalf("round %d: %d hits after the other store's write, want %d", i, len(hits), i+1)
		}
	}

	// And this store's own writes.
	put(t, s1, projA, Write{Type: Semantic, Key: "zebra-d", Body: "zebra"})
	if hits, err := s1.Search(ctx, p, SearchOptions{Query: "zebra"}); err != nil || len(hits) != 4 {
		t.Fatalf("%d hits after this store's write (%v), want 4", len(hits), err)
	}
}

// A write by another process is seen by the very next call. The test runs
// itself again as that process.
func TestSeesOtherProcess(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_WRITE_DB"); path != "" {
		s := openPath(t, path)
		key := os.Getenv("MEMORY_TEST_WRITE_KEY")
		if _, err := s.Import(ctx, projA.ID, Record{Type: Semantic, Key: key, Body: "an okapi"}, FileState{Stem: key, Hash: "h" + key}, nil, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openPath(t, path)
	p := projA.ID
	seen, err := s.MirrorChangesSince(ctx, p, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"okapi-a", "okapi-b"} {
		if hits, err := s.Search(ctx, p, SearchOptions{Query: "okapi"}); err != nil || len(hits) != i {
			t.Fatalf("round %d: %d hits before the write (%v), want %d", i, len(hits), err, i)
		}
		if ch, err := s.MirrorChangesSince(ctx, p, seen.Version); err != nil || ch.Version != seen.Version {
			t.Fatalf("round %d: changes with nothing written: %+v %v", i, ch, err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSeesOtherProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MEMORY_TEST_WRITE_DB="+path, "MEMORY_TEST_WRITE_KEY="+key)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("writer process: %v\n%s", err, out)
		}
		seen = seesOtherWrite(t, s, p, seen, key, "okapi", i)
	}
}

// seesOtherWrite checks that s sees, at once, the record key another
// process wrote in round i: in the mirror's changes since seen and as the
// i+1th hit for query. It returns the changes seen.
func seesOtherWrite(t *testing.T, s *Store, p scope.Identity, seen MirrorChanges, key, query string, i int) MirrorChanges {
	t.Helper()
	ch, err := s.MirrorChangesSince(ctx, p, seen.Version)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ch.Changed[key]; !ok || ch.Version == seen.Version {
		t.Fatalf("round %d: the other process's import is not seen: %+v", i, ch)
	}
	if hits, err := s.Search(ctx, p, SearchOptions{Query: query}); err != nil || len(hits) != i+1 {
		t.Fatalf("round %d: %d hits after the other process's write (%v), want %d", i, len(hits), err, i+1)
	}
	return ch
}

// BenchmarkMirrorChangesSinceUnchanged asks the mirror state what changed
// when nothing did, as the sync before every tool call does.
func BenchmarkMirrorChangesSinceUnchanged(b *testing.B) {
	s, _ := mustOpen(b)
	p := projA.ID
	for i := range 200 {
		key := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := s.Import(ctx, p, Record{Type: Semantic, Key: key, Body: "b"}, FileState{Stem: key, Hash: key}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	seen, err := s.MirrorChangesSince(ctx, p, -1)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.MirrorChangesSince(ctx, p, seen.Version); err != nil {
			b.Fatal(err)
		}
	}
}

// A database reached through a symlink has its -shm file beside the real
// file, where SQLite puts it; a stale one beside the link is not read.
func TestSeesWritesThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	realDir, linkDir := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	if err := os.MkdirAll(realDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(linkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	real, link := filepath.Join(realDir, "memory.db"), filepath.Join(linkDir, "memory.db")
	s1 := openPath(t, real)
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	// A stale log index beside the link, as an older copy might leave.
	stale, err := os.ReadFile(real + "-shm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(link+"-shm", stale, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openPath(t, link)
	p := projA.ID
	seen, err := s2.MirrorChangesSince(ctx, p, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.MirrorChangesSince(ctx, p, seen.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Import(ctx, p, Record{Type: Semantic, Key: "tapir", Body: "a tapir"}, FileState{Stem: "tapir", Hash: "h"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := s2.MirrorChangesSince(ctx, p, seen.Version)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ch.Changed["tapir"]; !ok {
		t.Fatalf("the write through the real path is not seen through the link: %+v", ch)
	}
}

// Another process tries to take the database out of WAL mode and then
// writes: while this process has it open, SQLite keeps it in WAL mode
// (leaving it needs the only hold on the file), and this process sees the
// write at once.
func TestSeesWriteWhileAnotherLeavesWAL(t *testing.T) {
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestSeesWriteWhileAnotherLeavesWAL$", "-test.count=1", "-test.v")
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

// Two Stores of one process on one file: one closing leaves the other
// whole, and a write by a third is still seen by the one left.
func TestSeesWritesAfterAnotherStoreCloses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	open := func() *Store {
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2 := open(), open()
	defer s2.Close()
	if _, err := s1.Search(ctx, projA.ID, SearchOptions{Query: "dingo"}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s2.Search(ctx, projA.ID, SearchOptions{Query: "dingo"}); err != nil || len(hits) != 0 {
		t.Fatalf("%+v %v", hits, err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if hits, err := s2.Search(ctx, projA.ID, SearchOptions{Query: "dingo"}); err != nil || len(hits) != 0 {
		t.Fatalf("after the other store's close: %+v %v", hits, err)
	}
	s3 := open()
	put(t, s3, projA, Write{Type: Semantic, Key: "dingo", Body: "a dingo"})
	s3.Close()
	if hits, err := s2.Search(ctx, projA.ID, SearchOptions{Query: "dingo"}); err != nil || len(hits) != 1 {
		t.Fatalf("the write is not seen: %+v %v", hits, err)
	}
}

// Another process writes and then empties the log with a TRUNCATE
// checkpoint, each time, so that the log is left with no frames after
// every write, as it was before it: the very next call of this process
// still sees each write. The test runs itself again as that process.
func TestSeesWritesAcrossLogResets(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_RESET_DB"); path != "" {
		s := openPath(t, path)
		key := os.Getenv("MEMORY_TEST_RESET_KEY")
		if _, err := s.Import(ctx, projA.ID, Record{Type: Semantic, Key: key, Body: "a quokka"}, FileState{Stem: key, Hash: "h" + key}, nil, nil); err != nil {
			t.Fatal(err)
		}
		var busy, logged, done int
		if err := s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil || busy != 0 || logged != 0 {
			t.Fatalf("checkpoint: busy %d, %d frames left (%v)", busy, logged, err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openPath(t, path)
	p := projA.ID
	seen, err := s.MirrorChangesSince(ctx, p, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"quokka-a", "quokka-b", "quokka-c"} {
		if hits, err := s.Search(ctx, p, SearchOptions{Query: "quokka"}); err != nil || len(hits) != i {
			t.Fatalf("round %d: %d hits before the write (%v), want %d", i, len(hits), err, i)
		}
		if ch, err := s.MirrorChangesSince(ctx, p, seen.Version); err != nil || ch.Version != seen.Version {
			t.Fatalf("round %d: changes with nothing written: %+v %v", i, ch, err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSeesWritesAcrossLogResets$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MEMORY_TEST_RESET_DB="+path, "MEMORY_TEST_RESET_KEY="+key)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("writer process: %v\n%s", err, out)
		}
		seen = seesOtherWrite(t, s, p, seen, key, "quokka", i)
	}
}

// Close while calls run: each call answers or fails, and none hangs or
// crashes.
func TestCloseWhileCalling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	for round := range 5 {
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, projA, Write{Type: Semantic, Key: "numbat", Body: "a numbat"})
		start := make(chan struct{})
		done := make(chan struct{})
		for range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				for range 200 {
					if _, err := s.MirrorChangesSince(ctx, projA.ID, 0); err != nil {
						return
					}
					if _, err := s.Search(ctx, projA.ID, SearchOptions{Query: "numbat"}); err != nil {
						return
					}
				}
			}()
		}
		close(start)
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for range 4 {
			<-done
		}
		if _, err := s.MirrorChangesSince(ctx, projA.ID, 0); err == nil {
			t.Fatalf("round %d: a closed store answered", round)
		}
	}
}
