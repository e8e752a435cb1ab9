package mirror

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/scope"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// clock is the store's injected clock: whole seconds, one step per reading,
// so times survive the files' second precision and records sort by time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// ws is one workspace with its memories directory and a store.
type ws struct {
	tb   testing.TB
	ctx  context.Context
	st   *memory.Store
	root string
	dir  *Dir
	p    scope.Identity
}

func mustOpen(tb testing.TB, path string) *memory.Store {
	tb.Helper()
	c := &clock{t: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}
	b, err := sqlite.Open(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := memory.New(context.Background(), b, &memory.Options{Now: c.now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// newWS makes a workspace in a temporary directory with a fresh store.
func newWS(tb testing.TB) *ws {
	tb.Helper()
	return newWSAt(tb, tb.TempDir(), mustOpen(tb, filepath.Join(tb.TempDir(), "memory.db")))
}

func newWSAt(tb testing.TB, root string, st *memory.Store) *ws {
	tb.Helper()
	d, err := Open(root)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return &ws{tb: tb, ctx: context.Background(), st: st, root: root, dir: d, p: scope.IdentityOf(root)}
}

func (w *ws) project() memory.Project { return memory.Project{ID: w.p, Mirror: w.dir} }

func (w *ws) put(typ memory.Type, key, desc, body string, tags ...string) memory.Record {
	w.tb.Helper()
	rec, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: typ, Key: key, Description: desc, Body: body, Tags: tags})
	if err != nil {
		w.tb.Fatal(err)
	}
	return rec
}

func (w *ws) sync() Report {
	w.tb.Helper()
	rep, err := Sync(w.ctx, w.st, w.p, w.dir)
	if err != nil {
		w.tb.Fatal(err)
	}
	return rep
}

func (w *ws) path(name string) string { return filepath.Join(w.dir.Path(), name) }

func (w *ws) read(name string) []byte {
	w.tb.Helper()
	b, err := os.ReadFile(w.path(name))
	if err != nil {
		w.tb.Fatal(err)
	}
	return b
}

func (w *ws) write(name, content string) {
	w.tb.Helper()
	if err := os.MkdirAll(w.dir.Path(), 0o755); err != nil {
		w.tb.Fatal(err)
	}
	if err := os.WriteFile(w.path(name), []byte(content), 0o644); err != nil {
		w.tb.Fatal(err)
	}
}

// age sets a file's mtime well in the past, as for a file edited a while
// ago, so Sync's guard against coarse mtimes does not re-read it.
func (w *ws) age(name string, ago time.Duration) {
	w.tb.Helper()
	t := time.Now().Add(-ago)
	if err := os.Chtimes(w.path(name), t, t); err != nil {
		w.tb.Fatal(err)
	}
}

// mirrored returns the project's mirrored records by key.
func (w *ws) mirrored() map[string]memory.Record {
	w.tb.Helper()
	rs, err := w.st.Mirrored(w.ctx, w.p)
	if err != nil {
		w.tb.Fatal(err)
	}
	m := map[string]memory.Record{}
	for _, r := range rs {
		m[r.Key] = r
	}
	return m
}

func (w *ws) peek(key string) (memory.Record, error) {
	lvl := scope.Project
	return w.st.Peek(w.ctx, w.p, memory.Selector{Key: key, Scope: &lvl})
}

// copyFixtures copies ../testdata/mirror/<set> into the memories directory.
func (w *ws) copyFixtures(set string) {
	w.tb.Helper()
	src := filepath.Join("..", "testdata", "mirror", set)
	entries, err := os.ReadDir(src)
	if err != nil {
		w.tb.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			w.tb.Fatal(err)
		}
		w.write(e.Name(), string(b))
	}
}
