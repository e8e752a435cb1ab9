package memory

import (
	"bytes"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// TestDeletedTextLeavesTheFile deletes a record and checks that its text
// is no longer in the database file or its WAL once checkpointed: freed
// pages are zeroed.
func TestDeletedTextLeavesTheFile(t *testing.T) {
	s, clk := mustOpen(t)
	const word = "quokkazanzibarite"
	body := "The vault passphrase hint is " + word + " and nothing else."
	put(t, s, projA, Write{Type: Semantic, Key: "hint", Body: body, Description: "about " + word})
	for i := 0; i < 50; i++ {
		put(t, s, projA, Write{Type: Semantic, Key: "other-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Body: "ordinary notes about the build"})
	}
	if _, err := s.Delete(ctx, projA, Selector{Key: "hint"}); err != nil {
		t.Fatal(err)
	}
	// An expired working note is purged the same way.
	d := time.Minute
	put(t, s, projA, Write{Type: Working, Key: "scratch", Body: "scratch " + word + "x", TTL: &d})
	clk.Add(2 * d)
	if _, err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{s.Path(), s.Path() + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if i := bytes.Index(bytes.ToLower(b), []byte(word[:12])); i >= 0 {
			t.Errorf("%s still holds the deleted text at byte %d: %q", filepath.Base(f), i, b[max(0, i-200):min(len(b), i+60)])
		}
	}
}

// TestUpgradeDropsOldFullText: a database from before search kept its own
// index has a full-text table holding the words of records deleted long
// ago; the upgrade drops it, and with it those words.
func TestUpgradeDropsOldFullText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := &Store{now: time.Now, path: path}
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_secure_delete=on")
	if err != nil {
		t.Fatal(err)
	}
	s.db = db
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	before := slices.Index(names, "migrations/0016_drop_fts.sql")
	if before < 0 {
		t.Fatal("no migration drops the full-text table")
	}
	if err := migrateTo(s.db, names, before); err != nil {
		t.Fatal(err)
	}
	const word = "quokkazanzibarite"
	if _, err := db.Exec(`INSERT INTO records_fts (rowid, key, body) VALUES (424242, 'gone', 'hint ` + word + `')`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := db.Exec(`INSERT INTO records_fts (rowid, key, body) VALUES (?, 'other', 'ordinary words')`, 500000+i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`DELETE FROM records_fts WHERE rowid = 424242`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s2, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(word[:12])) {
			t.Errorf("%s still holds words deleted before the upgrade", filepath.Base(f))
		}
	}
}

// TestCachedTextGoesStale checks that text cached for a project is not
// returned once a record it reads changes, whoever changed it.
func TestCachedTextGoesStale(t *testing.T) {
	s, _ := mustOpen(t)
	put(t, s, projA, Write{Type: Semantic, Key: "merger", Body: "x", Description: "Acme"})
	st, err := s.CacheStamp(ctx, projA.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetCachedAt(ctx, projA.ID, "instructions", "index: merger — Acme", st); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Cached(ctx, projA.ID, "instructions"); err != nil || !ok || v != "index: merger — Acme" {
		t.Fatalf("fresh cache: %q %v %v", v, ok, err)
	}
	put(t, s, projB, Write{Type: Semantic, Key: "elsewhere", Body: "y"})
	if _, ok, _ := s.Cached(ctx, projA.ID, "instructions"); !ok {
		t.Error("a change in another project made the cache stale")
	}
	if _, err := s.Delete(ctx, projA, Selector{Key: "merger"}); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Cached(ctx, projA.ID, "instructions"); err != nil || ok {
		t.Errorf("after the delete: %q %v %v", v, ok, err)
	}
	put(t, s, projA, Write{Type: Semantic, Key: "sys", Scope: scope.System, Body: "z"})
	st2, _ := s.CacheStamp(ctx, projA.ID)
	if st2 == st {
		t.Error("a system record does not move the stamp")
	}
}
