package mirror

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// twoProcesses is two servers' worth of stores and directories on one
// workspace and one database file.
func twoProcesses(t *testing.T) (a, b *ws) {
	t.Helper()
	root, db := t.TempDir(), filepath.Join(t.TempDir(), "memory.db")
	return newWSAt(t, root, mustOpen(t, db)), newWSAt(t, root, mustOpen(t, db))
}

func (w *ws) del(ctx context.Context, key string) error {
	lvl := scope.Project
	_, err := w.st.Delete(ctx, w.project(), memory.Selector{Key: key, Scope: &lvl})
	return err
}

// TestSyncDoesNotImportAFileDeletedMeanwhile is the interleaving behind
// "removed or renamed by hand" errors no human caused. A sync reads the
// state while one process is writing a new record (its file renamed into
// place, its transaction not yet committed), so the state does not know
// the file, but the listing does and the sync reads it. The writer commits;
// the record is deleted, file and all. The sync then imports what it read:
// the state is as it found it, empty, so only the file itself can tell
// that it is gone. Importing it would bring the deleted record back with a
// file that is gone, and the next write of the key would be refused.
func TestSyncDoesNotImportAFileDeletedMeanwhile(t *testing.T) {
	a, b := twoProcesses(t)
	read, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	b.dir.beforeImports = func() {
		close(read)
		<-release
	}
	var rep Report
	var serr error
	a.dir.afterOp = func(op, key string) {
		a.dir.afterOp = nil
		go func() {
			defer close(done)
			rep, serr = Sync(b.ctx, b.st, b.p, b.dir)
		}()
		<-read // b has read the state, without gamma, and gamma.md
	}
	a.put(memory.Semantic, "gamma", "", "First.")
	if err := a.del(a.ctx, "gamma"); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	if serr != nil {
		t.Fatal(serr)
	}
	if len(rep.Imported)+len(rep.Problems) > 0 {
		t.Errorf("sync imported the deleted record's file: %+v", rep)
	}
	if r, err := b.peek("gamma"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("deleted record is back: %+v, %v", r, err)
	}
	for _, w := range []*ws{b, a} {
		if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "gamma", Body: "Again."}); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(a.read("gamma.md")); !strings.HasSuffix(got, "\n\nAgain.\n") {
		t.Errorf("gamma.md:\n%s", got)
	}
}

// TestSyncDoesNotForgetAFileBackMeanwhile: a file that is back by the time
// the sync would delete its record (restored by hand, a branch switched
// back) keeps its record.
func TestSyncDoesNotForgetAFileBackMeanwhile(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Kept.")
	data := w.read("fact.md")
	if err := os.Remove(w.path("fact.md")); err != nil {
		t.Fatal(err)
	}
	w.dir.beforeRecheck = func(stem string) {
		w.dir.beforeRecheck = nil
		w.write(stem+".md", string(data))
	}
	if rep := w.sync(); len(rep.Deleted) > 0 {
		t.Errorf("sync deleted the record of a file that is back: %+v", rep)
	}
	if r, err := w.peek("fact"); err != nil || r.Body != "Kept." {
		t.Errorf("fact = %q, %v", r.Body, err)
	}
	if rep := w.sync(); !cmp.Equal(rep, Report{}) {
		t.Errorf("second sync: %+v", rep)
	}
	w.put(memory.Semantic, "fact", "", "Written again.")
}
