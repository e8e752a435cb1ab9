package mirror

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// TestSyncNeverSkipsWork drives two processes' worth of writers and a
// hand editing files on one workspace, at random, and after every sync
// checks that the sync left nothing undone: a new Dir, which knows nothing,
// finds nothing to import or delete; and the state the syncing Dir keeps,
// moved version by version, is the store's.
func TestSyncNeverSkipsWork(t *testing.T) {
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { syncRun(t, int64(seed)) })
	}
}

func syncRun(t *testing.T, seed int64) {
	root, db := t.TempDir(), filepath.Join(t.TempDir(), "memory.db")
	procs := []*ws{newWSAt(t, root, mustOpen(t, db)), newWSAt(t, root, mustOpen(t, db))}
	r := rand.New(rand.NewSource(seed))
	keys := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	lvl := scope.Project
	var ops []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last operations:\n%s", strings.Join(ops[max(0, len(ops)-12):], "\n"))
		}
	})
	for step := range 400 {
		pi := r.Intn(len(procs))
		w := procs[pi]
		key := keys[r.Intn(len(keys))]
		op := r.Intn(10)
		ops = append(ops, fmt.Sprintf("step %d: process %d, op %d, key %s", step, pi, op, key))
		switch {
		case op < 3:
			typ := memory.Semantic
			if r.Intn(3) == 0 {
				typ = memory.Procedural
			}
			_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: typ, Key: key, Body: fmt.Sprintf("body %d", step)})
			if err != nil && !errors.Is(err, memory.ErrConflict) {
				t.Fatal(err)
			}
		case op < 4:
			// A conflict: the file was edited since the last sync, and is
			// never deleted unseen.
			if _, err := w.st.Delete(w.ctx, w.project(), memory.Selector{Key: key, Scope: &lvl}); err != nil && !errors.Is(err, memory.ErrNotFound) && !errors.Is(err, memory.ErrConflict) {
				t.Fatal(err)
			}
		case op < 5 && r.Intn(5) == 0: // a file the sync must refuse, or one that breaks front matter
			w.write(key+".md", "---\ntype: gossip\n---\nRefused at step "+fmt.Sprint(step)+".\n")
		case op < 5: // a hand edit, or a new hand-written file
			name := key + ".md"
			old, err := os.ReadFile(w.path(name))
			if err != nil {
				old = []byte(fmt.Sprintf("Written by hand at step %d.\n", step))
			}
			w.write(name, strings.Replace(string(old), "body", "edited body", 1)+fmt.Sprintf("Line %d.\n", step))
		case op < 6 && r.Intn(8) == 0: // the whole directory, as after git rm -r
			os.RemoveAll(w.dir.Path())
		case op < 6:
			os.Remove(w.path(key + ".md"))
		case op < 7:
			os.Rename(w.path(key+".md"), w.path(keys[r.Intn(len(keys))]+".md"))
		default:
			checkSynced(t, w, w.sync(), step)
		}
	}
}

// checkSynced fails the test if w's last sync, which reported rep, left
// work for another or reported other problems than a full sync finds.
func checkSynced(t *testing.T, w *ws, rep Report, step int) {
	t.Helper()
	// The state as the next sync will hold it, moved forward from the
	// version this one kept, on a copy: the Dir's own must stay as it is.
	ch, err := w.st.MirrorChangesSince(w.ctx, w.p, w.dir.stateVersion)
	if err != nil {
		t.Fatal(err)
	}
	kept := maps.Clone(w.dir.state)
	maps.Copy(kept, ch.Changed)
	for _, stem := range ch.Gone {
		delete(kept, stem)
	}
	full, err := w.st.MirrorState(w.ctx, w.p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, kept); diff != "" {
		t.Fatalf("step %d: kept state differs from the store's (-store +kept):\n%s", step, diff)
	}
	fresh, err := Open(w.root)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	frep, err := Sync(w.ctx, w.st, w.p, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if len(frep.Imported)+len(frep.Deleted)+len(frep.Renamed) > 0 {
		t.Fatalf("step %d: a full sync after it still found work: %+v", step, frep)
	}
	if diff := cmp.Diff(paths(frep.Problems), paths(rep.Problems)); diff != "" {
		t.Fatalf("step %d: problems reported differ from a full sync's (-full +reported):\n%s", step, diff)
	}
}

func paths(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Path)
	}
	slices.Sort(out)
	return out
}

// TestSyncNoticesReplacedDirectory moves .prometheus away and makes a new
// memories directory in its place: the next sync reads the new one.
func TestSyncNoticesReplacedDirectory(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "old-fact", "", "Kept in the first directory.")
	w.sync()
	if err := os.Rename(filepath.Join(w.root, ".prometheus"), filepath.Join(w.root, ".prometheus-old")); err != nil {
		t.Fatal(err)
	}
	w.write("new-fact.md", "Written in the new directory.\n")
	rep := w.sync()
	if diff := cmp.Diff([]string{"new-fact"}, rep.Imported); diff != "" {
		t.Errorf("imported (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"old-fact"}, rep.Deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

// TestSyncWithoutDirectory: in a workspace with no memories directory a
// sync has nothing to do, after a note too. A directory made meanwhile,
// by hand or by another process's write, and a removed one, are each seen
// by the next sync.
func TestSyncWithoutDirectory(t *testing.T) {
	root, db := t.TempDir(), filepath.Join(t.TempDir(), "memory.db")
	a, b := newWSAt(t, root, mustOpen(t, db)), newWSAt(t, root, mustOpen(t, db))
	checkSynced(t, a, a.sync(), 0)
	// A note has no file: still nothing to do.
	if _, _, err := a.st.Put(a.ctx, a.project(), memory.Write{Scope: scope.Project, Type: memory.Working, Key: "note", Body: "A note."}); err != nil {
		t.Fatal(err)
	}
	if rep := a.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("sync after a note = %+v", rep)
	}

	// By hand: the directory and a file appear.
	a.write("alpha.md", "Alpha by hand.\n")
	if rep := a.sync(); !slices.Equal(rep.Imported, []string{"alpha"}) {
		t.Errorf("sync after the directory was made = %+v", rep)
	}
	// The whole directory goes: its records go with it.
	if err := os.RemoveAll(a.dir.Path()); err != nil {
		t.Fatal(err)
	}
	if rep := a.sync(); !slices.Equal(rep.Deleted, []string{"alpha"}) {
		t.Errorf("sync after the directory was removed = %+v", rep)
	}
	if _, err := a.peek("alpha"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("alpha after its directory went: %v", err)
	}
	checkSynced(t, b, b.sync(), 0)

	// Another process writes a fact: the directory is back, with a file
	// the store knows.
	a.put(memory.Semantic, "beta", "", "Beta from the other process.")
	checkSynced(t, b, b.sync(), 0)
	if got, err := b.peek("beta"); err != nil || got.Body != "Beta from the other process." {
		t.Errorf("beta = %+v, %v", got, err)
	}
	// A hand-written file in the directory the other process made.
	b.write("gamma.md", "Gamma by hand.\n")
	if rep := b.sync(); !slices.Equal(rep.Imported, []string{"gamma"}) {
		t.Errorf("sync after a hand-written file = %+v", rep)
	}
}

// TestSyncAfterDirectoryLeavesWorkspace: the memories directory, moved out
// of the workspace and linked back, or swapped for another directory
// behind the link, is refused by Sync and by writes from then on; nothing
// is read from or written there, and the records stay.
func TestSyncAfterDirectoryLeavesWorkspace(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Body.")
	w.sync()
	prom := filepath.Join(w.root, ".prometheus")
	away := filepath.Join(t.TempDir(), "away")
	if err := os.Rename(prom, away); err != nil {
		t.Fatal(err)
	}
	symlink(t, away, prom)
	if _, err := Sync(w.ctx, w.st, w.p, w.dir); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("Sync of the directory moved out and linked back: %v", err)
	}
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "other", Body: "x"})
	if err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("Put through a link out of the workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(away, "memories", "other.md")); err == nil {
		t.Error("a file was written outside the workspace")
	}

	// Another directory behind the link.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.MkdirAll(filepath.Join(other, "memories"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "memories", "planted.md"), []byte("Planted.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(prom)
	symlink(t, other, prom)
	if _, err := Sync(w.ctx, w.st, w.p, w.dir); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("Sync of another directory behind the link: %v", err)
	}
	if _, ok := w.mirrored()["planted"]; ok {
		t.Error("a file from outside the workspace was imported")
	}
	if _, ok := w.mirrored()["fact"]; !ok {
		t.Error("a refused directory deleted the records")
	}
}
