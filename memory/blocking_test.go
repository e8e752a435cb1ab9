package memory

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// The store's own goroutines run what may wait in the database for long
// through Options.Blocking: the checkpoints its commits bring on, and the
// timer's write of the uses that reads counted.
func TestBlockingRunsBackgroundWork(t *testing.T) {
	var runs atomic.Int64
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "memory.db"), &Options{Blocking: func(work func()) {
		runs.Add(1)
		work()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wait := func(what string, above int64) int64 {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); runs.Load() <= above; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s ran nothing through Blocking", what)
			}
		}
		return runs.Load()
	}
	for i := range checkpointEvery + 1 {
		put(t, s, projA, Write{Scope: scope.Project, Type: Working, Key: fmt.Sprintf("note-%d", i), Body: "a note"})
	}
	n := wait("a checkpoint", 0)
	// Let the quiet checkpoint after the burst go too.
	time.Sleep(checkpointIdle + 200*time.Millisecond)
	n = runs.Load()
	if _, err := s.Get(context.Background(), projA.ID, Selector{Key: "note-1", Type: Working}); err != nil {
		t.Fatal(err)
	}
	if !s.hasPending() {
		t.Fatal("a read counted no use")
	}
	wait("the write of uses", n)
	for deadline := time.Now().Add(10 * time.Second); s.hasPending(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the uses were not written")
		}
	}
}
