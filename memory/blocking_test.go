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
	var s *Store
	var runs, flushes atomic.Int64
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "memory.db"), &Options{Blocking: func(work func()) {
		pending := s.hasPending()
		runs.Add(1)
		work()
		if pending && !s.hasPending() {
			flushes.Add(1) // this work wrote the uses
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range checkpointEvery + 1 {
		put(t, s, projA, Write{Scope: scope.Project, Type: Working, Key: fmt.Sprintf("note-%d", i), Body: "a note"})
	}
	for deadline := time.Now().Add(10 * time.Second); runs.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint ran through Blocking")
		}
	}
	if _, err := s.Get(context.Background(), projA.ID, Selector{Key: "note-1", Type: Working}); err != nil {
		t.Fatal(err)
	}
	if !s.hasPending() {
		t.Fatal("a read counted no use")
	}
	for deadline := time.Now().Add(10 * time.Second); flushes.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the timer's write of uses did not run through Blocking")
		}
	}
}
