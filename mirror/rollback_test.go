package mirror

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// cancelAt returns a context that is cancelled right after the n-th file
// operation of w's directory (1 the first), between the file operation and
// the commit of its transaction, as a client cancelling a call at that
// moment would.
func (w *ws) cancelAt(n int) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	w.tb.Cleanup(cancel)
	ops := 0
	w.dir.hook = func(at, key string) {
		if at != "write" && at != "remove" {
			return
		}
		if ops++; ops == n {
			cancel()
		}
	}
	return ctx
}

// settled checks that disk and database agree after a call that failed:
// a sync finds nothing to import or delete, and the tools can write and
// delete every key again.
func (w *ws) settled(keys ...string) {
	w.tb.Helper()
	w.dir.hook = nil
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		w.tb.Errorf("sync after the failed call: %+v", rep)
	}
	for _, key := range keys {
		w.put(memory.Semantic, key, "", "Settled.")
		if err := w.del(w.ctx, key); err != nil {
			w.tb.Errorf("delete %s: %v", key, err)
		}
	}
}

// TestCancelledWriteChangesNoFile: a call cancelled after its file was
// written or removed, before the commit, leaves the file as it was. Left
// changed, a sync would import the change the call did not make (a write),
// or a later write would be refused as if someone had removed the file by
// hand (a delete), and the next sync would delete the record.
func TestCancelledWriteChangesNoFile(t *testing.T) {
	put := func(w *ws, ctx context.Context, key, body string) error {
		_, _, err := w.st.Put(ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: body})
		return err
	}
	for _, tc := range []struct {
		name string
		call func(w *ws, ctx context.Context) error
	}{
		{"update", func(w *ws, ctx context.Context) error { return put(w, ctx, "fact", "New.") }},
		{"create", func(w *ws, ctx context.Context) error { return put(w, ctx, "other", "New.") }},
		{"delete", func(w *ws, ctx context.Context) error { return w.del(ctx, "fact") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t)
			w.put(memory.Semantic, "fact", "", "Old.")
			before := w.snapshot()
			if err := tc.call(w, w.cancelAt(1)); !errors.Is(err, context.Canceled) {
				t.Fatalf("call: %v, want it cancelled", err)
			}
			if diff := cmp.Diff(before, w.snapshot()); diff != "" {
				t.Errorf("files (-before +after):\n%s", diff)
			}
			if r, err := w.peek("fact"); err != nil || r.Body != "Old." {
				t.Errorf("fact = %q, %v", r.Body, err)
			}
			w.settled("fact", "other")
		})
	}
}

// TestRolledBackTransactionPutsFilesBack: a transaction that wrote or
// removed several files and then failed puts every one back, newest first.
func TestRolledBackTransactionPutsFilesBack(t *testing.T) {
	t.Run("purge", func(t *testing.T) {
		// Two expired facts: the first file goes, then the call is
		// cancelled while the second goes.
		w := newWS(t)
		ttl := time.Second
		for _, key := range []string{"one", "two"} {
			if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: "Brief.", TTL: &ttl}); err != nil {
				t.Fatal(err)
			}
		}
		before := w.snapshot()
		if n, err := w.st.PurgeMirrored(w.cancelAt(2), w.project()); !errors.Is(err, context.Canceled) {
			t.Fatalf("purge: %d, %v; want it cancelled", n, err)
		}
		if diff := cmp.Diff(before, w.snapshot()); diff != "" {
			t.Errorf("files (-before +after):\n%s", diff)
		}
		w.dir.hook = nil
		if n, err := w.st.PurgeMirrored(w.ctx, w.project()); n != 2 || err != nil {
			t.Errorf("purge again: %d, %v", n, err)
		}
		if got := w.ls(); len(got) > 0 {
			t.Errorf("files after the purge: %v", got)
		}
	})
	t.Run("restore", func(t *testing.T) {
		// A restored record's file is written, then written again with
		// its exported times; the call is cancelled at the second.
		w := newWS(t)
		at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		rec := memory.Record{ID: "01JN8EY7HRTD0VMEMT4N7NG9D7", Scope: scope.Project, Type: memory.Semantic, Key: "restored", Body: "From a backup.", Confidence: 0.5, CreatedAt: at, UpdatedAt: at}
		if _, _, err := w.st.Restore(w.cancelAt(2), w.project(), rec); !errors.Is(err, context.Canceled) {
			t.Fatalf("restore: %v, want it cancelled", err)
		}
		if got := w.ls(); len(got) > 0 {
			t.Errorf("files after the cancelled restore: %v", got)
		}
		if _, err := w.peek("restored"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("restored record: %v", err)
		}
		w.settled("restored")
	})
}

// TestCancelledWriteKeepsTheLock: a call cancelled between its file write
// and its commit keeps the write lock until the file is back. Were the
// transaction rolled back the moment the call was cancelled, as
// database/sql does on its own, another process could write the key in
// between and find a file it has no record of: a human's edit, to it.
func TestCancelledWriteKeepsTheLock(t *testing.T) {
	a, b := twoProcesses(t)
	a.put(memory.Semantic, "fact", "", "Old.")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bDone := make(chan error, 1)
	a.dir.hook = func(at, key string) {
		if at != "write" {
			return
		}
		cancel()
		go func() {
			_, _, err := b.st.Put(b.ctx, b.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "fact", Body: "From b."})
			bDone <- err
		}()
		select {
		case err := <-bDone:
			t.Errorf("b wrote while a's file was not yet put back (%v)", err)
			bDone <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	if _, _, err := a.st.Put(ctx, a.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "fact", Body: "From a."}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a: %v, want it cancelled", err)
	}
	a.dir.hook = nil
	if err := <-bDone; err != nil {
		t.Fatalf("b: %v", err)
	}
	if r, err := a.peek("fact"); err != nil || r.Body != "From b." {
		t.Errorf("fact = %q, %v", r.Body, err)
	}
	got, err := Decode("fact", a.read("fact.md"))
	if err != nil || got.Body != "From b." {
		t.Errorf("fact.md = %q, %v", got.Body, err)
	}
	a.settled("fact")
}

// TestPutBackSparesHandEdits: undoing a file operation never overwrites
// or removes what a human did to the file in the meantime.
func TestPutBackSparesHandEdits(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	w.dir.hook = func(at, key string) {
		switch at {
		case "write":
			w.write(key+".md", "Edited by hand.\n")
		case "remove":
			w.write(key+".md", "Written again by hand.\n")
		}
	}
	for _, call := range []func(ctx context.Context) error{
		func(ctx context.Context) error {
			_, _, err := w.st.Put(ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "new", Body: "New."})
			return err
		},
		func(ctx context.Context) error { return w.del(ctx, "fact") },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		hook := w.dir.hook
		w.dir.hook = func(at, key string) {
			hook(at, key)
			if at == "write" || at == "remove" {
				cancel()
			}
		}
		if err := call(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("call: %v, want it cancelled", err)
		}
		w.dir.hook = hook
	}
	if got := string(w.read("new.md")); got != "Edited by hand.\n" {
		t.Errorf("new.md = %q", got)
	}
	if got := string(w.read("fact.md")); got != "Written again by hand.\n" {
		t.Errorf("fact.md = %q", got)
	}
	w.dir.hook = nil
	rep := w.sync()
	if diff := cmp.Diff([]string{"fact", "new"}, rep.Imported); diff != "" || len(rep.Problems) > 0 {
		t.Errorf("sync: %+v", rep)
	}
	if r, _ := w.peek("fact"); r.Body != "Written again by hand." {
		t.Errorf("fact = %q", r.Body)
	}
}

// TestPutBackSurvivesASweep: the file put back keeps its old mtime, but
// its temporary file must not carry it: another process's sync would
// sweep a temporary file that old as left over from a crash, and the file
// would not be put back.
func TestPutBackSurvivesASweep(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	w.age("fact.md", 2*time.Hour)
	before := w.snapshot()
	other, err := Open(w.root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.dir.hook = func(at, key string) {
		switch at {
		case "write":
			cancel()
		case "restore":
			r, err := other.openRoot(false)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			(&syncer{d: other, now: time.Now()}).sweepTempSub(r)
		}
	}
	if _, _, err := w.st.Put(ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "fact", Body: "New."}); !errors.Is(err, context.Canceled) {
		t.Fatalf("put: %v, want it cancelled", err)
	}
	if diff := cmp.Diff(before, w.snapshot()); diff != "" {
		t.Errorf("files (-before +after):\n%s", diff)
	}
	w.settled("fact")
}
