package memory

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Another process writes and then empties the log with a TRUNCATE
// checkpoint, each time, so that the log index header is left with no
// frames after every write, as it was before it: the very next call of
// this process still sees each write. The test runs itself again as that
// process.
func TestChangeTokenSeesWritesAcrossLogResets(t *testing.T) {
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
		before, ok := s.changeToken(ctx)
		if !ok {
			t.Fatal("no change token")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestChangeTokenSeesWritesAcrossLogResets$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MEMORY_TEST_RESET_DB="+path, "MEMORY_TEST_RESET_KEY="+key)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("writer process: %v\n%s", err, out)
		}
		if after, ok := s.changeToken(ctx); !ok || after == before {
			t.Fatalf("round %d: the token did not move over a write and a log reset: %v %v", i, after, ok)
		}
		seen = seesOtherWrite(t, s, p, seen, key, "quokka", i)
	}
}

// Close while calls run: a call either reads the log index header before
// its mapping goes or finds that it cannot tell; none reads it after
// (which would fault, or read another file's header).
func TestChangeTokenCloseWhileCalling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	for round := range 5 {
		s, err := Open(ctx, path, nil)
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
					s.changeToken(ctx)
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
		if _, ok := s.changeToken(ctx); ok {
			t.Fatalf("round %d: a closed store gave a token", round)
		}
	}
}
