package memory

import (
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"

	"prom.codes/memory-mcp/scope"
)

func pageSizeOf(tb testing.TB, s *Store) int {
	tb.Helper()
	var n int
	if err := s.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// createWithPageSize makes an empty SQLite database at path whose pages are
// size bytes.
func createWithPageSize(tb testing.TB, path string, size int) {
	tb.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("PRAGMA page_size = " + strconv.Itoa(size) + "; CREATE TABLE x (a); DROP TABLE x"); err != nil {
		tb.Fatal(err)
	}
}

// A database an earlier build made with small pages keeps them, and works
// as before, its records and all.
func TestPageSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	createWithPageSize(t, path, 1024)
	old, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, old, projA, Write{Scope: scope.Project, Type: Semantic, Key: "kept", Body: "Kept across the reopen."})
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	old, err = openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := pageSizeOf(t, old); got != 1024 {
		t.Errorf("existing database: page size %d, want 1024 as it was made", got)
	}
	r, err := old.Get(ctx, projA.ID, Selector{Key: "kept"})
	if err != nil || r.Body != "Kept across the reopen." {
		t.Errorf("Get after reopen = %+v, %v", r, err)
	}
}
