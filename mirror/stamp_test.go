package mirror

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
)

// writeWithMtime writes name and sets its mtime back to mtime, as cp -p,
// rsync -t and tools that keep a file's times do.
func (w *ws) writeWithMtime(name, content string, mtime time.Time) {
	w.tb.Helper()
	w.write(name, content)
	if err := os.Chtimes(w.path(name), mtime, mtime); err != nil {
		w.tb.Fatal(err)
	}
}

func needStamps(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("files are stamped on Linux only")
	}
}

// checkStamp fails unless name's mtime is the stamp of a write between
// before and after.
func checkStamp(t *testing.T, w *ws, name string, before, after time.Time) {
	t.Helper()
	fi, err := os.Lstat(w.path(name))
	if err != nil {
		t.Fatal(err)
	}
	m := fi.ModTime()
	if m.Nanosecond()%1000 != stampNanos {
		t.Errorf("%s: mtime %s is not a stamp", name, m.Format(time.RFC3339Nano))
	}
	if got, want := uint64(m.Nanosecond()/1000%1000), inode(fi)%1000; got != want {
		t.Errorf("%s: stamp carries inode digits %03d, the file's inode ends %03d", name, got, want)
	}
	if lo, hi := stampFor(before, inode(fi)), stampFor(after, inode(fi)); m.Before(lo) || m.After(hi) {
		t.Errorf("%s: mtime %s, want the stamp of a write between %s and %s", name, m.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
	}
	if c := time.Unix(0, ctime(fi)); c.Sub(m) <= racyWindow {
		t.Errorf("%s: changed at %s, mtime %s: not set back far enough", name, c.Format(time.RFC3339Nano), m.Format(time.RFC3339Nano))
	}
}

// TestWritesAreStamped: a new file and a new version, written with a file
// made ahead or a named temporary file, carry the stamp of their write.
func TestWritesAreStamped(t *testing.T) {
	needStamps(t)
	for _, ahead := range []bool{true, false} {
		w := newWS(t)
		if !ahead {
			d, err := Open(w.root) // files made ahead only when asked
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			w = &ws{tb: t, ctx: w.ctx, st: w.st, root: w.root, dir: d, p: w.p}
		}
		before := time.Now()
		w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
		checkStamp(t, w, "deploy.md", before, time.Now())
		before = time.Now()
		w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Tuesday after the freeze.")
		checkStamp(t, w, "deploy.md", before, time.Now())
		if got := string(w.read("deploy.md")); !strings.Contains(got, "Tuesday after the freeze") {
			t.Errorf("file holds %q", got)
		}
		if n := len(tempEntries(t, w)); n != 0 && !ahead {
			t.Errorf("%d temporary files left", n)
		}
	}
}

// TestStampedFileKnownWithoutReading: after a write, the sync of this and
// of another process knows the file by its size and times alone. The state
// is made to record another content: a sync that read the file would see
// it differ and import it.
func TestStampedFileKnownWithoutReading(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	other := newWSAt(t, w.root, w.st)
	w.sync()
	other.sync() // both watch
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	for _, x := range []*ws{w, other} {
		x.sync()
		x.dir.syncMu.Lock()
		st := x.dir.state["deploy"]
		st.Hash = "recorded-as-something-else"
		x.dir.state["deploy"] = st
		r, err := x.dir.openRoot(false)
		if err != nil {
			t.Fatal(err)
		}
		known := x.dir.asRecorded(r, "deploy")
		r.Close()
		x.dir.syncMu.Unlock()
		if !known {
			t.Error("a stamped file was read to be known")
		}
	}
}

// TestEditRightAfterAWriteIsImported: a person's edit of the same size the
// moment after the server wrote the file, before any sync, is imported by
// the next sync of the process that wrote it, of another that was
// watching, and of a new one; so is a second edit that puts the edited
// file's mtime back.
func TestEditRightAfterAWriteIsImported(t *testing.T) {
	for _, who := range []string{"writer", "watching", "new"} {
		t.Run(who, func(t *testing.T) {
			w := newWS(t)
			other := newWSAt(t, w.root, w.st)
			w.sync()
			other.sync()
			w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
			edited := strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1)
			w.write("deploy.md", edited)
			syncer := w
			switch who {
			case "watching":
				syncer = other
			case "new":
				syncer = newWSAt(t, w.root, w.st)
			}
			syncer.sync()
			if got, _ := syncer.peek("deploy"); got.Body != "Deploy on Friday." {
				t.Fatalf("after an edit right after the write the record holds %q", got.Body)
			}
			// Again, putting back the mtime of the edit it replaces.
			fi, err := os.Stat(w.path("deploy.md"))
			if err != nil {
				t.Fatal(err)
			}
			w.writeWithMtime("deploy.md", strings.Replace(edited, "Friday", "Sunday", 1), fi.ModTime())
			syncer.sync()
			if got, _ := syncer.peek("deploy"); got.Body != "Deploy on Sunday." {
				t.Errorf("after an edit that kept the mtime the record holds %q", got.Body)
			}
		})
	}
}

// TestOlderVersionPutBackWithItsStamp: a copy of an earlier version of the
// same size, put back with its mtime (cp -p), is imported: its stamp is
// not the current version's.
func TestOlderVersionPutBackWithItsStamp(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.sync()
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	v1 := w.read("deploy.md")
	fi1, err := os.Stat(w.path("deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Friday.")
	w.sync()
	w.writeWithMtime("deploy.md", string(v1), fi1.ModTime()) // cp -p of a copy kept from then
	w.sync()
	if got, _ := w.peek("deploy"); got.Body != "Deploy on Monday." {
		t.Errorf("after the older version was put back the record holds %q", got.Body)
	}
}

// TestStampOnlyWhereWriteSetIt: the state of a file Write wrote is
// stamped; one whose mtime a tool set back, one without a change time and
// one changed since are not.
func TestStampOnlyWhereWriteSetIt(t *testing.T) {
	needStamps(t)
	w := newWS(t)
	w.put(memory.Semantic, "deploy", "When we deploy", "Deploy on Monday.")
	w.sync()
	recorded := func() (memory.FileState, os.FileInfo) {
		fi, err := os.Lstat(w.path("deploy.md"))
		if err != nil {
			t.Fatal(err)
		}
		return memory.FileState{Stem: "deploy", Size: fi.Size(), MTime: fi.ModTime().UnixNano(), CTime: ctime(fi)}, fi
	}
	w.dir.syncMu.Lock()
	st := w.dir.state["deploy"]
	w.dir.syncMu.Unlock()
	if _, fi := recorded(); !stamped(st, fi) {
		t.Fatalf("the state %+v of a file just written is not stamped", st)
	}
	noCTime := st
	noCTime.CTime = 0
	if _, fi := recorded(); stamped(noCTime, fi) {
		t.Error("a state without a change time taken for a stamp")
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second) // touch -d, cp -p
	if err := os.Chtimes(w.path("deploy.md"), old, old); err != nil {
		t.Fatal(err)
	}
	if rec, fi := recorded(); stamped(rec, fi) {
		t.Errorf("an mtime set back by hand (%s) taken for a stamp", old)
	}
	if stamped(st, func() os.FileInfo { _, fi := recorded(); return fi }()) {
		t.Error("the written state still taken for the file after its mtime changed")
	}
	w.write("deploy.md", strings.Replace(string(w.read("deploy.md")), "Monday", "Friday", 1))
	if _, fi := recorded(); stamped(st, fi) {
		t.Error("the written state taken for the file after an edit")
	}
}
