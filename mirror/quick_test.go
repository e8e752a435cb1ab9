package mirror

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// TestQuickSyncNeverSkipsWork drives two processes' worth of writers and a
// hand editing files on one workspace, at random, and after every sync
// checks that the sync left nothing undone: a new Dir, which knows nothing
// and so scans everything, finds nothing to import or delete; and the
// state the syncing Dir keeps, moved version by version, is the store's.
func TestQuickSyncNeverSkipsWork(t *testing.T) {
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { quickSyncRun(t, int64(seed)) })
	}
}

func quickSyncRun(t *testing.T, seed int64) {
	root, db := t.TempDir(), filepath.Join(t.TempDir(), "memory.db")
	procs := []*ws{newWSAt(t, root, mustOpen(t, db)), newWSAt(t, root, mustOpen(t, db))}
	r := rand.New(rand.NewSource(seed))
	keys := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	lvl := scope.Project
	quick := 0
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
			if _, err := w.st.Delete(w.ctx, w.project(), memory.Selector{Key: key, Scope: &lvl}); err != nil && !errors.Is(err, memory.ErrNotFound) {
				t.Fatal(err)
			}
		case op < 5: // a hand edit, or a new hand-written file
			name := key + ".md"
			old, err := os.ReadFile(w.path(name))
			if err != nil {
				old = []byte(fmt.Sprintf("Written by hand at step %d.\n", step))
			}
			w.write(name, strings.Replace(string(old), "body", "edited body", 1)+fmt.Sprintf("Line %d.\n", step))
		case op < 6:
			os.Remove(w.path(key + ".md"))
		case op < 7:
			os.Rename(w.path(key+".md"), w.path(keys[r.Intn(len(keys))]+".md"))
		default:
			before := w.dir.stateVersion
			rep := w.sync()
			if len(rep.Imported)+len(rep.Deleted)+len(rep.Renamed) == 0 && w.dir.stateVersion != before {
				quick++
			}
			checkSynced(t, w, step)
		}
	}
	if quick == 0 {
		t.Error("no sync took the state forward without a full scan; the test exercised nothing")
	}
}

// checkSynced fails the test if w's last sync left work for another.
func checkSynced(t *testing.T, w *ws, step int) {
	t.Helper()
	// The state as the next sync will hold it, moved forward from the
	// version this one read.
	kept, _, _, err := w.dir.mirrorState(w.ctx, w.st, w.p)
	if err != nil {
		t.Fatal(err)
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
	rep, err := Sync(w.ctx, w.st, w.p, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Imported)+len(rep.Deleted)+len(rep.Renamed) > 0 {
		t.Fatalf("step %d: a full sync after it still found work: %+v", step, rep)
	}
}
