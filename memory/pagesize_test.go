package memory

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// size bytes, as SQLite's default made every database before this build.
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

// A database this build creates has small pages; one an earlier build made
// keeps its own, and works as before, its records and all.
func TestPageSize(t *testing.T) {
	s, _ := mustOpen(t)
	if got := pageSizeOf(t, s); got != pageSize {
		t.Errorf("new database: page size %d, want %d", got, pageSize)
	}

	path := filepath.Join(t.TempDir(), "memory.db")
	createWithPageSize(t, path, 4096)
	old, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, old, projA, Write{Scope: scope.Project, Type: Semantic, Key: "kept", Body: "Kept across the reopen."})
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	old, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := pageSizeOf(t, old); got != 4096 {
		t.Errorf("existing database: page size %d, want 4096 as it was made", got)
	}
	r, err := old.Get(ctx, projA.ID, Selector{Key: "kept"})
	if err != nil || r.Body != "Kept across the reopen." {
		t.Errorf("Get after reopen = %+v, %v", r, err)
	}
}

// BenchmarkPutNote writes a new scratch note into a database of 1,000,
// as a database made at each page size: the log takes every page a write
// changes whole, so it reports the log's bytes per write beside the time.
func BenchmarkPutNote(b *testing.B) {
	for _, size := range []int{4096, pageSize} {
		b.Run("page="+strconv.Itoa(size), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "memory.db")
			createWithPageSize(b, path, size)
			s, err := Open(context.Background(), path, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.stopCheckpoints() // so the log's growth is every write's
			body := strings.Repeat("A note about the task at hand and what was tried. ", 6)
			note := func(i int) Write {
				return Write{Scope: scope.Project, Type: Working, Key: "note-" + strconv.Itoa(i), Body: body + strconv.Itoa(i),
					Description: "note " + strconv.Itoa(i), Tags: []string{"scratch"}}
			}
			for i := range 1000 {
				if _, _, err := s.Put(ctx, projA, note(i)); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, _, err := s.Put(ctx, projA, note(1000+i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if fi, err := os.Stat(path + "-wal"); err == nil {
				b.ReportMetric(float64(fi.Size())/float64(b.N), "log-B/op")
			}
		})
	}
}
