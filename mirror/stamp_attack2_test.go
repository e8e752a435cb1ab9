package mirror

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// editInPlaceKeepingTimes rewrites name in place (same inode), same size,
// replacing from with to, and puts its mtime back as it was: a formatter or
// a sync tool that keeps times (rsync --inplace -t, touch -r after an edit).
func (w *ws) editInPlaceKeepingTimes(name, from, to string) {
	w.tb.Helper()
	fi, err := os.Lstat(w.path(name))
	if err != nil {
		w.tb.Fatal(err)
	}
	data, err := os.ReadFile(w.path(name))
	if err != nil {
		w.tb.Fatal(err)
	}
	edited := strings.Replace(string(data), from, to, 1)
	f, err := os.OpenFile(w.path(name), os.O_WRONLY, 0)
	if err != nil {
		w.tb.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(edited), 0); err != nil {
		w.tb.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(w.path(name), fi.ModTime(), fi.ModTime()); err != nil {
		w.tb.Fatal(err)
	}
}

// TestStampAttack2InPlaceEditKeepingThisWritesStamp: a person's tool
// rewrites the file in place, same size, keeping its mtime, the moment
// after the server's write put it there and before written's lstat. The
// state would record the edited file's size, stamp (this write's own) and
// change time with the hash of what the server wrote, and no sync would
// read the file again; written's read-back records it so that the next
// sync of every process reads and imports it.
func TestStampAttack2InPlaceEditKeepingThisWritesStamp(t *testing.T) {
	needStamps(t)
	for _, how := range []string{"new file", "new version"} {
		t.Run(how, func(t *testing.T) {
			w := newWS(t)
			other := newWSAt(t, w.root, w.st)
			w.put(memory.Semantic, "seed", "", "Seed.")
			if how == "new version" {
				w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Sunday.")
			}
			w.sync()
			other.sync() // both watch
			w.dir.hook = func(at, key string) {
				if at == "renamed" && key == "deploy" {
					w.editInPlaceKeepingTimes("deploy.md", "Monday", "Friday")
				}
			}
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			w.dir.hook = nil
			if got := string(w.read("deploy.md")); !strings.Contains(got, "Deploy on Friday.") {
				t.Fatalf("the file holds %q, want the person's edit", got)
			}
			seenEverywhere(t, w, other, "deploy", "Deploy on Friday.")
		})
	}
}

// readByFullSync reports whether a full sync of w reads stem's file: the
// state w holds for it is made to record another content, so a sync that
// reads the file imports it again.
func readByFullSync(t *testing.T, w *ws, stem string) bool {
	t.Helper()
	w.dir.syncMu.Lock()
	st := w.dir.state[stem]
	st.Hash = "recorded-as-something-else"
	w.dir.state[stem] = st
	w.dir.clean = false // the next sync is a full one
	w.dir.syncMu.Unlock()
	rep := w.sync()
	return slices.Contains(rep.Imported, stem)
}

// fullSync runs a full sync of w.
func fullSync(w *ws) Report {
	w.tb.Helper()
	w.dir.syncMu.Lock()
	w.dir.clean = false
	w.dir.syncMu.Unlock()
	return w.sync()
}

// readByQuickCheck reports whether the quick check of w reads stem's file
// to know it (see readByFullSync).
func readByQuickCheck(t *testing.T, w *ws, stem string) bool {
	t.Helper()
	w.dir.syncMu.Lock()
	defer w.dir.syncMu.Unlock()
	st := w.dir.state[stem]
	good := st.Hash
	st.Hash = "recorded-as-something-else"
	w.dir.state[stem] = st
	defer func() { st.Hash = good; w.dir.state[stem] = st }()
	r, err := w.dir.openRoot(false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return !w.dir.asRecorded(r, stem)
}

// outOfRacyWindow waits until name's last change, of content or of name,
// is out of racyWindow: a file that changed within it is read, as a second
// change in the same clock tick would leave its times alone.
func outOfRacyWindow(t *testing.T, w *ws, name string) {
	t.Helper()
	fi, err := os.Lstat(w.path(name))
	if err != nil {
		t.Fatal(err)
	}
	if d := racyWindow + 10*time.Millisecond - time.Since(lastChange(fi)); d > 0 {
		time.Sleep(d)
	}
}

// readOnceSettled reports whether a full sync still reads stem's file once
// two full syncs have read it (it is new to the state) and its last change
// is out of racyWindow.
func readOnceSettled(t *testing.T, w *ws, stem string) bool {
	t.Helper()
	fullSync(w)
	fullSync(w)
	outOfRacyWindow(t, w, stem+".md")
	return readByFullSync(t, w, stem)
}

// TestStampAttack2FreshWriteNotReadAgain: the control for the tests
// below: a file Write wrote is known by its times alone, by a full sync
// and by the quick check.
func TestStampAttack2FreshWriteNotReadAgain(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	w.sync()
	outOfRacyWindow(t, w, "deploy.md")
	if readByQuickCheck(t, w, "deploy") {
		t.Error("the quick check reads a file Write wrote")
	}
	if readByFullSync(t, w, "deploy") {
		t.Error("a full sync reads a file Write wrote")
	}
}

// TestStampAttack2RolledBackFileReadForever: a cancelled write (or
// removal) puts the old version back as a new file, and gives it the old
// version's mtime: a stamp whose inode digits are those of the old file.
// Such a stamp is not its file's, so a full sync trusts the file's times
// only once its change time is out of the racy window, as it trusted an
// old mtime before the stamps; it must not read the file on every full
// sync until the fact is written again. (The quick check reads it when an
// event names it, as it read every file before the stamps.)
func TestStampAttack2RolledBackFileReadForever(t *testing.T) {
	needStamps(t)
	for _, op := range []string{"write", "remove"} {
		t.Run(op, func(t *testing.T) {
			w := newWS(t)
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			w.sync()
			before := w.read("deploy.md")
			var err error
			if op == "write" {
				_, _, err = w.st.Put(w.cancelAt(1), w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "deploy", Description: "When we deploy", Body: "Deploy on Sunday."})
			} else {
				lvl := scope.Project
				_, err = w.st.Delete(w.cancelAt(1), w.project(), memory.Selector{Key: "deploy", Scope: &lvl})
			}
			if err == nil {
				t.Fatalf("the cancelled %s succeeded", op)
			}
			w.dir.hook = nil
			if got := w.read("deploy.md"); string(got) != string(before) {
				t.Fatalf("after the rollback the file holds %q", got)
			}
			if readOnceSettled(t, w, "deploy") {
				t.Error("a full sync still reads the file put back, unchanged since the last sync read it")
			}
		})
	}
}

// TestStampAttack2CopyWithTimesReadForever: a memories directory restored
// from a copy that kept the times (cp -a, rsync -a, tar x), here one file
// copied with its times and renamed over itself, same content. Every file
// then carries a stamp of an inode it no longer has. Each is read once (it
// is a new file) and, once its change time is out of the racy window, not
// again by every full sync (every process's first, then one a minute), as
// old mtimes were trusted before the stamps.
func TestStampAttack2CopyWithTimesReadForever(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	w.sync()
	fi, err := os.Lstat(w.path("deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(w.dir.Path(), ".deploy.md.rsync")
	if err := os.WriteFile(copied, w.read("deploy.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(copied, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(copied, w.path("deploy.md")); err != nil {
		t.Fatal(err)
	}
	if readOnceSettled(t, w, "deploy") {
		t.Error("a full sync still reads the copied file, unchanged since the last sync read it")
	}
}

// TestStampAttack2HardLinkMadeAfterFullSync: a person links a memory file
// from outside (ln deploy.md ~/notes/) after the process's last full sync,
// then edits it there. link(2) raises no event in the memories directory,
// so no quick check sees the second name: the edit is imported by the next
// full sync (a minute after the last, with the export check), which sees
// the second name, and from then on no sync is skipped while it stays.
func TestStampAttack2HardLinkMadeAfterFullSync(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	watching := newWSAt(t, w.root, w.st)
	watching.sync() // full: no second name yet
	watching.sync()
	link := filepath.Join(t.TempDir(), "deploy.md")
	if err := os.Link(w.path("deploy.md"), link); err != nil {
		t.Skip(err)
	}
	watching.sync() // the next call
	edited := strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1)
	if err := os.WriteFile(link, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	fullSync(watching)
	if got := watching.body("deploy"); got != "Deploy on Friday." {
		t.Errorf("after an edit through a hard link the next full sync left %q", got)
	}
	if !watching.dir.linked {
		t.Error("the full sync did not see the second name")
	}
	quick := watching.dir.quickSyncs
	watching.sync()
	if watching.dir.quickSyncs != quick {
		t.Error("a sync was skipped while a file has a second name")
	}
}

// TestStampAttack2OwnTransientLinksDoNotStick: without files made ahead,
// another process creates files through named temporary files linked in
// (two names for a moment) and replaces them; a watching process's syncs
// import every write and are skipped again once the writes stop.
func TestStampAttack2OwnTransientLinksDoNotStick(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	d, err := Open(w.root) // no files made ahead
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cli := &ws{tb: t, ctx: w.ctx, st: w.st, root: w.root, dir: d, p: w.p}
	cli.put(memory.Semantic, "seed", "", "Seed.")
	w.sync()
	w.sync()
	for i := range 30 {
		cli.put(memory.Semantic, fmt.Sprintf("fact-%02d", i), "", "Value on Monday.")
		w.sync()
		cli.put(memory.Semantic, fmt.Sprintf("fact-%02d", i), "", "Value on Friday.")
		w.sync()
	}
	for i := range 30 {
		if got := w.body(fmt.Sprintf("fact-%02d", i)); got != "Value on Friday." {
			t.Errorf("fact-%02d holds %q", i, got)
		}
	}
	if n := len(tempEntries(t, w)); n != 0 {
		t.Errorf("%d temporary files left", n)
	}
	w.sync()
	quick := w.dir.quickSyncs
	w.sync()
	w.sync()
	if w.dir.quickSyncs == quick {
		t.Errorf("syncs are not skipped after the writes stopped (linked=%v)", w.dir.linked)
	}
}

// TestStampAttack2MissingDirThenWrittenElsewhere: a process whose first
// sync found no memories directory; another process (without files made
// ahead) creates it with a file, and a person edits that file right after,
// same size, keeping its stamp. The first process's next sync imports it.
func TestStampAttack2MissingDirThenWrittenElsewhere(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.sync() // no directory
	d, err := Open(w.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cli := &ws{tb: t, ctx: w.ctx, st: w.st, root: w.root, dir: d, p: w.p}
	cli.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	w.editInPlaceKeepingTimes("deploy.md", "Monday", "Friday")
	w.sync()
	if got := w.body("deploy"); got != "Deploy on Friday." {
		t.Errorf("the record holds %q", got)
	}
	w.sync()
	w.editInPlaceKeepingTimes("deploy.md", "Friday", "Sunday")
	w.sync()
	if got := w.body("deploy"); got != "Deploy on Sunday." {
		t.Errorf("the record holds %q", got)
	}
}

// TestStampAttack2OnAFileMadeAhead: a new fact's file is a file made ahead,
// linked in and read back through its own descriptor. A person edits it
// in place keeping its times, or renames another file with this write's
// stamp over it, between the link and the read-back: either way the
// person's file is imported by every process's next sync, and the write
// took a file made ahead.
func TestStampAttack2OnAFileMadeAhead(t *testing.T) {
	needStamps(t)
	needSpares(t)
	for _, how := range []string{"edited in place", "renamed over"} {
		t.Run(how, func(t *testing.T) {
			w := newWS(t)
			other := newWSAt(t, w.root, w.st)
			w.put(memory.Semantic, "seed", "", "Seed.")
			w.sync()
			other.sync() // both watch
			n := spared(t, w.dir)
			w.dir.hook = func(at, key string) {
				if at != "renamed" || key != "deploy" {
					return
				}
				if how == "edited in place" {
					w.editInPlaceKeepingTimes("deploy.md", "Monday", "Friday")
					return
				}
				fi, err := os.Stat(w.path("deploy.md"))
				if err != nil {
					t.Error(err)
					return
				}
				swap := filepath.Join(w.dir.Path(), ".swap")
				edited := strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1)
				if err := os.WriteFile(swap, []byte(edited), 0o644); err != nil {
					t.Error(err)
				}
				if err := os.Chtimes(swap, fi.ModTime(), fi.ModTime()); err != nil {
					t.Error(err)
				}
				if err := os.Rename(swap, w.path("deploy.md")); err != nil {
					t.Error(err)
				}
			}
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			w.dir.hook = nil
			if left := len(w.dir.spares.files); left >= n {
				t.Errorf("the write took no file made ahead (%d left of %d)", left, n)
			}
			if got := string(w.read("deploy.md")); !strings.Contains(got, "Deploy on Friday.") {
				t.Fatalf("the file holds %q, want the person's edit", got)
			}
			seenEverywhere(t, w, other, "deploy", "Deploy on Friday.")
		})
	}
}
