package memory

import (
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
func TestChangeTokenSeesOtherStores(t *testing.T) {
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
		tok1, ok1 := s1.changeToken(ctx)
		ch, err := s1.MirrorChangesSince(ctx, p, seen.Version)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Version != seen.Version || len(ch.Changed) != 0 || len(ch.Gone) != 0 {
			t.Fatalf("round %d: nothing written, yet changes: %+v", i, ch)
		}
		if tok2, ok2 := s1.changeToken(ctx); !ok1 || !ok2 || tok1 != tok2 {
			t.Fatalf("round %d: token moved with no write: %d %v, %d %v", i, tok1, ok1, tok2, ok2)
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

	// This store's own writes move the token too.
	tok1, _ := s1.changeToken(ctx)
	put(t, s1, projA, Write{Type: Semantic, Key: "zebra-d", Body: "zebra"})
	if tok2, _ := s1.changeToken(ctx); tok1 == tok2 {
		t.Fatal("the token did not move with this store's own write")
	}
	if hits, err := s1.Search(ctx, p, SearchOptions{Query: "zebra"}); err != nil || len(hits) != 4 {
		t.Fatalf("%d hits after this store's write (%v), want 4", len(hits), err)
	}

	// A closed store cannot tell, and says so.
	s3, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s3.changeToken(ctx); !ok {
		t.Fatal("no token on SQLite")
	}
	s3.Close()
	if _, ok := s3.changeToken(ctx); ok {
		t.Fatal("a closed store gave a token")
	}
}

// A write by another process is seen by the very next call, its commit
// being published in the log index header that process shares with this
// one. The test runs itself again as that process.
func TestChangeTokenSeesOtherProcess(t *testing.T) {
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
		cmd := exec.Command(os.Args[0], "-test.run=^TestChangeTokenSeesOtherProcess$", "-test.count=1")
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

// BenchmarkChangeToken is the cost every tool call pays to learn whether
// anything was committed since its caches were filled.
func BenchmarkChangeToken(b *testing.B) {
	s, _ := mustOpen(b)
	for b.Loop() {
		if _, ok := s.changeToken(ctx); !ok {
			b.Fatal("no token")
		}
	}
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
func TestChangeTokenThroughSymlink(t *testing.T) {
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

// The vector index too sees at once what another Store embedded, and
// what it removed.
func TestChangeTokenVectorsOfOtherStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s1 := openPath(t, path)
	s2 := openPath(t, path)
	_, c := standIn(t, "toy")
	const q = "feline"
	if hits := semantic(t, s1, c, projA.ID, q, SearchOptions{}); len(hits) != 0 {
		t.Fatalf("hits in an empty store: %v", hitKeys(hits))
	}
	put(t, s2, projA, sem("pets", "The kitten sleeps on the sofa."))
	embedAll(t, s2, c)
	if hits := semantic(t, s1, c, projA.ID, q, SearchOptions{}); len(hits) == 0 || hits[0].Record.Key != "pets" {
		t.Fatalf("the other store's vector is not seen: %v", hitKeys(hits))
	}
	if _, err := s2.Delete(ctx, projA, Selector{Key: "pets", Type: Semantic}); err != nil {
		t.Fatal(err)
	}
	if hits := semantic(t, s1, c, projA.ID, q, SearchOptions{}); len(hits) != 0 {
		t.Fatalf("the other store's delete is not seen: %v", hitKeys(hits))
	}
}
