package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A new database gets 1 KiB pages, commits leave the log to the store's
// own checkpoints, and those bring every commit back into the database:
// after a burst and a quiet second the log holds nothing left to copy.
func TestCheckpointsCopyTheLogBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var page, auto int
	if err := d.DB().QueryRowContext(ctx, "PRAGMA page_size").Scan(&page); err != nil || page != 1024 {
		t.Fatalf("page_size = %d, %v; want 1024", page, err)
	}
	if err := d.DB().QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	if _, err := d.DB().ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	// Only a checkpoint writes the database file itself: with commits
	// leaving the log alone, it grows only when the store's checkpoints run.
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	big := strings.Repeat("x", 1000)
	for i := range 200 {
		tx, end, err := d.BeginWrite(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES ($1)", big+time.Now().String()); err != nil {
			t.Fatal(err)
		}
		if err := end(true); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for size() <= before+100*1024 {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after 200 commits (%d before): no checkpoint ran", size(), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Short-lived processes (hooks, the command line) that write and close
// within a second, beside a server that holds the database open and
// writes nothing: each copies its own commits back as it closes, so the
// log does not grow with every one of them.
func TestShortLivedWritersLeaveTheLogSmall(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	server, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if _, err := server.DB().ExecContext(ctx, "CREATE TABLE t (v TEXT)"); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1000)
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	var first int64
	for run := range 20 {
		d, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			tx, end, err := d.BeginWrite(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES ($1)", big); err != nil {
				t.Fatal(err)
			}
			if err := end(true); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = walSize()
		}
	}
	if got := walSize(); got > 3*first {
		t.Errorf("the log is %d KiB after 20 short runs, %d KiB after the first: it grows with every run", got>>10, first>>10)
	}
}
