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

// syncMidWrite makes b sync during a's next write, once a's file is
// renamed into place and before a commits: b reads the state and the
// directory then, and waits. finish lets b go on and returns its sync's
// report.
func syncMidWrite(a, b *ws) (finish func() (Report, error)) {
	read, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	b.dir.hook = func(at, _ string) {
		if at == "read" {
			close(read)
			<-release
		}
	}
	var rep Report
	var err error
	a.dir.hook = func(at, _ string) {
		if at != "write" {
			return
		}
		a.dir.hook = nil
		go func() {
			defer close(done)
			rep, err = Sync(b.ctx, b.st, b.p, b.dir)
		}()
		<-read
	}
	return func() (Report, error) {
		close(release)
		<-done
		return rep, err
	}
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
	finish := syncMidWrite(a, b)
	a.put(memory.Semantic, "gamma", "", "First.")
	if err := a.del(a.ctx, "gamma"); err != nil {
		t.Fatal(err)
	}
	rep, serr := finish()
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

// TestSyncLeavesAFileItsWriterRecords: a sync that reads another
// process's new file before that process commits, and so finds no state
// for it, imports nothing once the writer has recorded it: the record
// keeps its source and its time, and the file stays as it was written.
func TestSyncLeavesAFileItsWriterRecords(t *testing.T) {
	a, b := twoProcesses(t)
	finish := syncMidWrite(a, b)
	rec := a.put(memory.Semantic, "gamma", "", "First.")
	data := a.read("gamma.md")
	rep, serr := finish()
	if serr != nil {
		t.Fatal(serr)
	}
	if len(rep.Imported)+len(rep.Renamed)+len(rep.Deleted)+len(rep.Problems) > 0 {
		t.Errorf("sync imported a file its writer recorded: %+v", rep)
	}
	got, err := b.peek("gamma")
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != rec.Source || !got.UpdatedAt.Equal(rec.UpdatedAt) {
		t.Errorf("record changed: source %s, updated %v; want %s, %v", got.Source, got.UpdatedAt, rec.Source, rec.UpdatedAt)
	}
	if now := a.read("gamma.md"); string(now) != string(data) {
		t.Errorf("gamma.md changed:\n%s", now)
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
	w.dir.hook = func(at, stem string) {
		if at == "recheck" {
			w.dir.hook = nil
			w.write(stem+".md", string(data))
		}
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

// TestFileChangedByHandWhileAToolWritesIt: a person saves, removes or
// renames a file while a tool call is writing or deleting it, between the
// server's look at the file and its read, or right after the server's
// write. The call is refused as a conflict with the person's change (or,
// for a delete that finds the file gone, done), never failed as an
// internal error, and the person's change stands.
func TestFileChangedByHandWhileAToolWritesIt(t *testing.T) {
	saved := "Saved by hand.\n"
	save := func(w *ws, key string) { // as an editor does: a new file renamed over
		tmp := w.path("." + key + ".swp")
		if err := os.WriteFile(tmp, []byte(saved), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, w.path(key+".md")); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(w *ws, key string) {
		if err := os.Remove(w.path(key + ".md")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		at     string
		change func(w *ws, key string)
		call   func(w *ws) error
		want   string // what the file holds after: "" for no file
	}{
		{"saved as a write reads it", "lstat", save, func(w *ws) error { _, err := w.update("fact", "From a tool."); return err }, saved},
		{"removed as a write reads it", "lstat", remove, func(w *ws) error { _, err := w.update("fact", "From a tool."); return err }, ""},
		{"removed as it is written", "renamed", remove, func(w *ws) error { _, err := w.update("fact", "From a tool."); return err }, ""},
		{"saved as a delete reads it", "lstat", save, func(w *ws) error { return w.del(w.ctx, "fact") }, saved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t)
			w.put(memory.Semantic, "fact", "", "Old.")
			w.dir.hook = func(at, key string) {
				if at == tc.at {
					w.dir.hook = nil
					tc.change(w, key)
				}
			}
			err := tc.call(w)
			if !errors.Is(err, memory.ErrConflict) {
				t.Errorf("call: %v, want a conflict", err)
			}
			got, rerr := os.ReadFile(w.path("fact.md"))
			if tc.want == "" && !errors.Is(rerr, os.ErrNotExist) || tc.want != "" && string(got) != tc.want {
				t.Errorf("fact.md = %q, %v; want %q", got, rerr, tc.want)
			}
			// The next sync takes the person's change.
			rep := w.sync()
			if r, err := w.peek("fact"); tc.want == "" && (len(rep.Deleted) != 1 || err == nil) || tc.want != "" && r.Body != strings.TrimSpace(tc.want) {
				t.Errorf("after a sync: %+v; fact = %q, %v", rep, r.Body, err)
			}
		})
	}

	// A delete that finds the file removed by hand is done: the record
	// goes too.
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	w.dir.hook = func(at, key string) {
		if at == "lstat" {
			w.dir.hook = nil
			remove(w, key)
		}
	}
	if err := w.del(w.ctx, "fact"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := w.peek("fact"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("fact after the delete: %v", err)
	}
}

func (w *ws) update(key, body string) (memory.Record, error) {
	lvl := scope.Project
	return w.st.Update(w.ctx, w.project(), memory.Selector{Key: key, Scope: &lvl}, memory.Patch{Body: &body})
}

// TestHandEditAsAToolWritesIsKept: a person edits a file between the
// server's check that it is as last recorded and its write or removal.
// The edit is never lost: the call is refused as a conflict, the file
// holds the person's edit, and the next sync imports it.
func TestHandEditAsAToolWritesIsKept(t *testing.T) {
	edited := "Edited by hand.\n"
	inPlace := func(w *ws) { w.write("fact.md", edited) }
	save := func(w *ws) { // a new file renamed over, as editors save
		if err := os.WriteFile(w.path(".fact.swp"), []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(w.path(".fact.swp"), w.path("fact.md")); err != nil {
			t.Fatal(err)
		}
	}
	write := func(w *ws) error { _, err := w.update("fact", "From a tool."); return err }
	del := func(w *ws) error { return w.del(w.ctx, "fact") }
	for _, tc := range []struct {
		name string
		edit func(w *ws)
		call func(w *ws) error
	}{
		{"write, edited in place", inPlace, write},
		{"write, saved", save, write},
		{"delete, edited in place", inPlace, del},
		{"delete, saved", save, del},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t)
			w.put(memory.Semantic, "fact", "", "Old.")
			w.dir.hook = func(at, key string) {
				if at == "checked" {
					w.dir.hook = nil
					tc.edit(w)
				}
			}
			if err := tc.call(w); !errors.Is(err, memory.ErrConflict) {
				t.Errorf("call: %v, want a conflict", err)
			}
			if got := string(w.read("fact.md")); got != edited {
				t.Errorf("fact.md = %q, want the edit", got)
			}
			w.sync()
			if r, err := w.peek("fact"); err != nil || r.Body != strings.TrimSpace(edited) {
				t.Errorf("fact after a sync = %q, %v", r.Body, err)
			}
			if got := w.ls(); len(got) != 1 {
				t.Errorf("files: %v", got)
			}
		})
	}
}
