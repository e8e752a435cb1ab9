package mirror

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
)

// heldOpen counts this process's descriptors open on the directory dir.
func heldOpen(t *testing.T, dir string) int {
	t.Helper()
	return fdsWhere(t, func(target string) bool { return target == dir || target == dir+" (deleted)" })
}

// heldWS is a workspace whose directory is held after two writes, let go
// keep after the last (0: the default, longer than any of these tests).
func heldWS(t *testing.T, keep time.Duration) *ws {
	t.Helper()
	w := newWS(t)
	w.dir.spares.keep = keep
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	w.put(memory.Semantic, "second", "", "The second.")
	if n := heldOpen(t, w.dir.Path()); n == 0 {
		t.Fatal("no descriptor open on the directory after two writes")
	}
	return w
}

// awaitLetGo waits up to 5 s for w's directory to be let go.
func awaitLetGo(t *testing.T, w *ws, what string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); heldOpen(t, w.dir.Path()) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the directory is still held %s", what)
		}
	}
}

// TestHeldDirectoryRenamedAway: a person renames the memories directory
// away and makes a new one between two writes. The held directory, still
// whole under its new name, is not written to: the next write lands in
// the new directory, and the old one is let go.
func TestHeldDirectoryRenamedAway(t *testing.T) {
	needSpares(t)
	w := heldWS(t, 0)
	old := w.dir.Path() + ".old"
	if err := os.Rename(w.dir.Path(), old); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(w.dir.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	w.sync() // the renaming is imported: both facts are gone
	rec := w.put(memory.Semantic, "third", "", "The third.")
	if got, want := string(w.read("third.md")), string(Encode(rec)); got != want {
		t.Errorf("third.md = %q, want %q", got, want)
	}
	if _, err := os.Lstat(filepath.Join(old, "third.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("third.md in the directory renamed away: %v", err)
	}
	if n := heldOpen(t, old); n != 0 {
		t.Errorf("%d descriptors still open on the directory renamed away", n)
	}
}

// TestHeldDirectoryBehindASymlink: between two writes, .prometheus is
// swapped for a symlink to a directory outside the workspace that holds
// a memories directory. The write is refused, as without a held
// directory, and nothing is written outside the workspace.
func TestHeldDirectoryBehindASymlink(t *testing.T) {
	needSpares(t)
	w := heldWS(t, 0)
	outside := t.TempDir()
	if err := os.Rename(filepath.Join(w.root, ".prometheus"), filepath.Join(outside, ".prometheus")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, ".prometheus"), filepath.Join(w.root, ".prometheus")); err != nil {
		t.Fatal(err)
	}
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Type: memory.Semantic, Key: "third", Body: "The third."})
	if err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("write through a symlink out of the workspace: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(outside, ".prometheus", "memories", "third.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("third.md written outside the workspace: %v", err)
	}
}

// TestHeldDirectoryLetGoWhenIdle: the directory held between writes is
// let go with the files made ahead once writes stop, and a server that
// only reads (syncs) never holds it again.
func TestHeldDirectoryLetGoWhenIdle(t *testing.T) {
	needSpares(t)
	w := heldWS(t, 100*time.Millisecond)
	awaitLetGo(t, w, "after writes stopped")
	w.write("by-hand.md", "---\ntype: semantic\n---\nWritten by hand.\n")
	w.age("by-hand.md", time.Hour)
	for range 3 {
		w.sync()
	}
	if n := heldOpen(t, w.dir.Path()); n != 0 || w.dir.held != nil {
		t.Errorf("syncs alone hold the directory: %d descriptors open", n)
	}
	if _, err := w.peek("by-hand"); err != nil {
		t.Errorf("by-hand.md not imported: %v", err)
	}
}

// TestHeldDirectoryLetGoAfterWritesThatMakeNoFile: once the directory was
// let go, the next writes change nothing on disk (the same fact again) or
// are refused (a file edited by hand): none takes a file made ahead, yet
// the directory they hold is let go as well once writes stop; and after
// Close no write holds it.
func TestHeldDirectoryLetGoAfterWritesThatMakeNoFile(t *testing.T) {
	needSpares(t)
	w := heldWS(t, 100*time.Millisecond)
	letGo := func(what string) { t.Helper(); awaitLetGo(t, w, what) }
	letGo("after the writes stopped")
	w.put(memory.Semantic, "second", "", "The second.") // the same bytes: no file written
	if _, err := os.Stat(w.path("second.md")); err != nil {
		t.Fatal(err)
	}
	letGo("after a write that changed nothing")
	w.write("first.md", "---\ntype: semantic\n---\nEdited by hand.\n")
	w.age("first.md", time.Hour)
	if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Type: memory.Semantic, Key: "first", Body: "From a tool."}); err == nil {
		t.Fatal("a write over a file edited by hand and not imported was not refused")
	}
	letGo("after a write refused over a file edited by hand")

	w.dir.Close()
	w.put(memory.Semantic, "third", "", "The third.")
	if n := heldOpen(t, w.dir.Path()); n != 0 {
		t.Errorf("%d descriptors open on the directory after Close and a write", n)
	}
}
