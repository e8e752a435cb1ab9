package mirror

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// Two processes on one workspace write, update and delete facts in a
// random order, the other process's write sometimes started inside one's
// transaction (so that it commits the moment the first does), people edit
// and remove files by hand, and both sync now and then. After every step
// what each process is told changed since the version it holds is what a
// process that only asks the database is told; a sync after only tools'
// writes finds nothing to import, delete or refuse; every hand edit is
// imported by the next sync; and at the end every file holds its record.
func TestOwnPutTwoProcessesRandom(t *testing.T) {
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomOwnPuts(t, seed, 150) })
	}
}

func randomOwnPuts(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dbPath := filepath.Join(t.TempDir(), "memory.db")
	root := t.TempDir()
	a := newWSAt(t, root, mustOpen(t, dbPath))
	b := newWSAt(t, root, mustOpen(t, dbPath))
	asks := mustOpen(t, dbPath)
	procs := []*ws{a, b}
	since := map[*ws]int64{a: -1, b: -1}
	look := func(step string) {
		t.Helper()
		for _, w := range procs {
			since[w] = toldAsTheDatabase(t, fmt.Sprintf("seed %d, %s", seed, step), w, asks, since[w])
		}
	}
	keys := []string{"alpha", "beta", "gamma", "delta", "eps"}
	key := func() string { return keys[rng.IntN(len(keys))] }
	hand := map[string]string{} // stems edited or removed by hand, not yet synced: what they hold ("" removed)
	syncBy := func(w *ws, step string) {
		t.Helper()
		rep := w.sync()
		for stem, body := range hand {
			if body == "" {
				if _, err := w.peek(stem); err == nil {
					t.Fatalf("seed %d, %s: %s removed by hand, its record stays: %+v", seed, step, stem, rep)
				}
				continue
			}
			if !slices.Contains(rep.Imported, stem) {
				t.Fatalf("seed %d, %s: %s edited by hand, not imported: %+v", seed, step, stem, rep)
			}
			if r, err := w.peek(stem); err != nil || r.Body != body {
				t.Fatalf("seed %d, %s: %s = %q, %v; edited by hand to %q", seed, step, stem, r.Body, err, body)
			}
		}
		if len(hand) == 0 && len(rep.Imported)+len(rep.Renamed)+len(rep.Deleted)+len(rep.Problems) > 0 {
			t.Fatalf("seed %d, %s: after tools' writes only, sync: %+v", seed, step, rep)
		}
		clear(hand)
	}
	var bg sync.WaitGroup
	for i := range steps {
		a.dir.hook, b.dir.hook = nil, nil
		w, o := a, b
		if rng.IntN(2) == 0 {
			w, o = b, a
		}
		k := key()
		body := fmt.Sprintf("Body %d of %s.", rng.IntN(3), k)
		if rng.IntN(4) == 0 && len(hand) == 0 {
			// the other process writes right after this one commits
			ok, ob := key(), fmt.Sprintf("Theirs %d.", i)
			w.dir.hook = func(at, _ string) {
				if at != "write" {
					return
				}
				w.dir.hook = nil
				bg.Add(1)
				go func() {
					defer bg.Done()
					o.st.Put(o.ctx, o.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: ok, Body: ob})
				}()
			}
		}
		var step string
		switch op := rng.IntN(14); {
		case op < 6:
			step = fmt.Sprintf("%d put %s", i, k)
			_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: k, Body: body})
			if err != nil && len(hand) == 0 {
				t.Fatalf("seed %d, %s: %v", seed, step, err)
			}
			// A write over a file edited or removed by hand is refused, or
			// is a no-op (the same content) that leaves the file alone:
			// either way the next sync imports the hand's change.
		case op < 7:
			step = fmt.Sprintf("%d note", i)
			w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Working, Key: "note-" + k, Body: body})
		case op < 8:
			step = fmt.Sprintf("%d update %s", i, k)
			w.st.Update(w.ctx, w.project(), memory.Selector{Key: k, Type: memory.Semantic}, memory.Patch{Body: &body})
		case op < 9:
			step = fmt.Sprintf("%d delete %s", i, k)
			if _, err := w.st.Delete(w.ctx, w.project(), memory.Selector{Key: k, Type: memory.Semantic}); err == nil {
				delete(hand, k)
			}
		case op < 10:
			if _, err := os.Stat(w.path(k + ".md")); err != nil {
				continue
			}
			step = fmt.Sprintf("%d hand edit %s", i, k)
			edited := fmt.Sprintf("Edited by hand at %d.", i)
			data := string(w.read(k + ".md"))
			// the body is what follows the front matter: rewrite it whole
			if j := strings.Index(data, "\n---\n"); j >= 0 {
				data = data[:j+5] + "\n" + edited + "\n"
			}
			w.write(k+".md", data)
			hand[k] = edited
		case op < 11:
			if _, err := os.Stat(w.path(k + ".md")); err != nil {
				continue
			}
			step = fmt.Sprintf("%d hand remove %s", i, k)
			os.Remove(w.path(k + ".md"))
			hand[k] = ""
		default:
			step = fmt.Sprintf("%d sync", i)
			bg.Wait()
			syncBy(w, step)
		}
		w.dir.hook = nil
		bg.Wait()
		if testing.Verbose() {
			t.Logf("%s by %v", step, w == a)
		}
		look(step)
	}
	bg.Wait()
	syncBy(a, "end")
	syncBy(b, "end")
	for _, w := range procs {
		for k, r := range w.mirrored() {
			if got := string(w.read(k + ".md")); !strings.Contains(got, r.Body) {
				t.Fatalf("seed %d: %s.md holds\n%s\nnot its record's body %q", seed, k, got, r.Body)
			}
		}
	}
}
