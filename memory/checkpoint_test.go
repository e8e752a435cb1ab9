package memory

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// Commits never checkpoint themselves; the Store's own goroutine copies
// the log back into the database soon after.
func TestCheckpointsInTheBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s := openAt(t, path, c)
	var auto int
	if err := s.db.QueryRow("PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	for i := range 2 * checkpointEvery {
		put(t, s, projA, Write{Scope: scope.Project, Type: Working, Key: fmt.Sprintf("note-%d", i), Body: "a note long enough to fill a few pages over the run"})
	}
	// The pages reach the database file only by a checkpoint.
	for deadline := time.Now().Add(10 * checkpointIdle); size() <= before; {
		if time.Now().After(deadline) {
			t.Fatalf("the database file is still %d bytes: no checkpoint ran", size())
		}
		time.Sleep(checkpointIdle / 10)
	}
	// And what was written is all there after a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, c)
	rows, _, err := s.List(ctx, projA.ID, ListOptions{Type: Working, Limit: 500})
	if err != nil || len(rows) != 2*checkpointEvery {
		t.Fatalf("after reopening: %d notes, %v; want %d", len(rows), err, 2*checkpointEvery)
	}
}
