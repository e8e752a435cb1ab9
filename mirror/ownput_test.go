package mirror

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// After each of a process's own writes of facts and notes, updates,
// deletes, and another process's writes, what the process is told changed
// in the mirror state is what a process that only ever asks the database
// is told, and a sync finds every file as recorded. (A Put that was the
// only commit since the last look answers from what it wrote: see
// memory.ownPut.)
func TestOwnWritesAnswerAsTheDatabaseWould(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "memory.db")
	root := t.TempDir()
	a := newWSAt(t, root, mustOpen(t, dbPath))
	b := newWSAt(t, root, mustOpen(t, dbPath)) // another process
	asks := mustOpen(t, dbPath)                // one that never writes
	a.put(memory.Semantic, "seed", "", "A fact to start with.")
	a.sync()
	since := int64(-1)
	look := func(step string) {
		t.Helper()
		since = toldAsTheDatabase(t, step, a, asks, since)
		if rep := a.sync(); len(rep.Imported)+len(rep.Renamed)+len(rep.Deleted)+len(rep.Problems) > 0 {
			t.Fatalf("%s: sync: %+v", step, rep)
		}
	}
	look("start")
	put := func(w *ws, typ memory.Type, key, body string) {
		t.Helper()
		if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: typ, Key: key, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	// A body far from ASCII, and of some size (keys are ASCII by rule).
	put(a, memory.Semantic, "cafe-uber-nihon", strings.Repeat("Ünïcödé — 日本語のテキスト. ", 1500))
	look("a fact in another script")
	put(a, memory.Semantic, "cafe-uber-nihon", "Short again.")
	look("that fact rewritten short")
	// A secret-shaped body is refused before anything is written: nothing
	// to note, and the next answer is still the database's.
	if _, _, err := a.st.Put(a.ctx, a.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "cafe-uber-nihon",
		Body: "token ghp_" + strings.Repeat("a1B2c3D4e5", 3) + "f6G7h8"}); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("a secret-shaped body: %v; want it refused as a secret", err)
	}
	look("a secret refused")
	if !strings.Contains(string(a.read("cafe-uber-nihon.md")), "Short again.") {
		t.Fatal("the refused write changed the file")
	}
	for i := range 3 {
		put(a, memory.Semantic, fmt.Sprintf("fact-%d", i), "A new fact.")
		look("a new fact")
		put(a, memory.Semantic, fmt.Sprintf("fact-%d", i), "The fact rewritten.")
		look("a fact rewritten")
		put(a, memory.Semantic, fmt.Sprintf("fact-%d", i), "The fact rewritten.")
		look("the same fact again")
		put(a, memory.Working, fmt.Sprintf("note-%d", i), "A note.")
		look("a note")
		put(a, memory.Procedural, fmt.Sprintf("how-%d", i), "1. Do it.")
		look("a procedure")
		put(b, memory.Semantic, fmt.Sprintf("theirs-%d", i), "Another process's fact.")
		put(a, memory.Semantic, fmt.Sprintf("mine-%d", i), "Mine, after theirs.")
		look("another process's fact, then one of ours")
		put(a, memory.Semantic, fmt.Sprintf("mine-%d", i), "Mine again.")
		put(b, memory.Semantic, fmt.Sprintf("theirs-%d", i), "Theirs, rewritten after mine.")
		look("one of ours, then another process's")
		if _, err := a.st.Update(a.ctx, a.project(), memory.Selector{Key: fmt.Sprintf("fact-%d", i), Type: memory.Semantic}, memory.Patch{Body: ptr("The fact updated.")}); err != nil {
			t.Fatal(err)
		}
		look("a fact updated")
		if _, err := a.st.Delete(a.ctx, a.project(), memory.Selector{Key: fmt.Sprintf("fact-%d", i), Type: memory.Semantic}); err != nil {
			t.Fatal(err)
		}
		look("a fact deleted")
	}
}

// Two processes take turns rewriting one fact, each right after the other:
// each must know the other's file before it writes (a state one write
// behind would call the other's file a hand edit and refuse, or worse,
// overwrite it), and every rewrite lands.
func TestTwoProcessesTakeTurnsOnOneFact(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "memory.db")
	root := t.TempDir()
	a := newWSAt(t, root, mustOpen(t, dbPath))
	b := newWSAt(t, root, mustOpen(t, dbPath))
	a.put(memory.Semantic, "shared", "", "Version 0.")
	for i := 1; i <= 20; i++ {
		w := a
		if i%2 == 0 {
			w = b
		}
		if rep := w.sync(); len(rep.Imported)+len(rep.Deleted)+len(rep.Problems) > 0 {
			t.Fatalf("turn %d: sync: %+v", i, rep)
		}
		body := fmt.Sprintf("Version %d.", i)
		if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "shared", Body: body}); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		for _, r := range []*ws{a, b} {
			r.sync()
			if rec, err := r.peek("shared"); err != nil || rec.Body != body {
				t.Fatalf("turn %d: a process reads %q, %v; want %q", i, rec.Body, err, body)
			}
		}
	}
}

// toldAsTheDatabase checks that what w's store says changed in w's
// mirror state since version since is what asks, a store that never
// writes (so every answer of its comes from the database), says; it
// returns the version now.
func toldAsTheDatabase(t *testing.T, step string, w *ws, asks *memory.Store, since int64) int64 {
	t.Helper()
	got, err := w.st.MirrorChangesSince(w.ctx, w.p, since)
	if err != nil {
		t.Fatal(err)
	}
	want, err := asks.MirrorChangesSince(w.ctx, w.p, since)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.Gone)
	slices.Sort(want.Gone)
	if got.Version != want.Version || !maps.Equal(got.Changed, want.Changed) || !slices.Equal(got.Gone, want.Gone) {
		t.Fatalf("%s: since %d told %+v, the database says %+v", step, since, got, want)
	}
	return got.Version
}
