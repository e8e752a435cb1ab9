package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

// TestSyncNeverForgetsAFileBeingWritten plays two processes in one: A
// writes new project facts (each a new file) while B syncs the same
// workspace in a loop. No file is ever removed, so B's syncs must never
// delete a record. A sync that reads the store's mirror state after A's
// commit but lists the directory before A's rename would take the new
// file for a removed one.
func TestSyncNeverForgetsAFileBeingWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("a race probe")
	}
	ctx := context.Background()
	e := newFastEnv(t)
	root, err := scope.Root(e.root, "")
	if err != nil {
		t.Fatal(err)
	}
	p := scope.IdentityOf(root)
	dbPath := e.db
	open := func() (*memory.Store, *mirror.Dir) {
		st, err := openStore(ctx, dbPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		d, err := mirror.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		return st, d
	}
	stA, dirA := open()
	stB, dirB := open()

	// The window is a few microseconds wide: write for a while, with three
	// other "processes" syncing, to have a good chance of hitting it.
	done := make(chan struct{})
	var mu sync.Mutex
	var deleted []string
	syncs := 0
	var wg sync.WaitGroup
	for i := range 3 {
		st, d := stB, dirB
		if i > 0 {
			st, d = open()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				rep, err := mirror.Sync(ctx, st, p, d)
				if err != nil {
					t.Errorf("sync: %v", err)
					return
				}
				mu.Lock()
				syncs++
				deleted = append(deleted, rep.Deleted...)
				mu.Unlock()
			}
		}()
	}
	deadline := time.Now().Add(4 * time.Second)
	n := 0
	for ; time.Now().Before(deadline); n++ {
		_, _, err := stA.Put(ctx, memory.Project{ID: p, Mirror: dirA}, memory.Write{
			Scope: scope.Project, Type: memory.Semantic, Key: fmt.Sprintf("fact-%04d", n), Body: fmt.Sprintf("fact number %d", n),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()

	// Whatever happened meanwhile, a last sync leaves every record in place.
	if _, err := mirror.Sync(ctx, stB, p, dirB); err != nil {
		t.Fatal(err)
	}
	recs, err := stB.Mirrored(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("%d records after the last sync, want %d", len(recs), n)
	}
	t.Logf("%d new files written against %d concurrent syncs: %d records wrongly deleted", n, syncs, len(deleted))
	if len(deleted) > 0 {
		// Fix: mirror/sync.go looks for the file again before forgetting it
		// (see the report).
		regressed(t, "syncs deleted %d records whose files were never removed, e.g. %v; the next sync re-imported them", len(deleted), deleted[:min(5, len(deleted))])
	}
}
