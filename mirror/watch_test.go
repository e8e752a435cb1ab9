package mirror

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
)

// isCookie reports whether name, in the temporary directory, is a
// watcher's cookie, there while its Dir is open.
func isCookie(name string) bool { return strings.HasPrefix(name, cookiePrefix) }

// watched is a workspace holding one synced fact, whose syncs after the
// first look only at what the watcher reports (no full scan is due).
func watched(t *testing.T) *ws {
	t.Helper()
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	w.sync()
	if w.dir.watcher == nil {
		t.Skip("no watcher on this file system")
	}
	return w
}

// partial makes the next sync one that relies on the watcher: the last
// full scan counts as just done.
func (w *ws) partial() {
	w.dir.syncMu.Lock()
	w.dir.scannedAt = time.Now()
	w.dir.syncMu.Unlock()
}

const editedFact = "---\ntype: semantic\n---\n\nEdited.\n"

// TestWatchedChangesAreSeen is each way a person changes a file, seen by
// the very next sync with no full scan.
func TestWatchedChangesAreSeen(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(w *ws)
		key  string // the record to look for; "" when deleted
		body string
	}{
		{"in-place save", func(w *ws) {
			f, err := os.OpenFile(w.path("fact.md"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(editedFact)
			f.Close()
		}, "fact", "Edited."},
		{"atomic save", func(w *ws) {
			tmp := w.path(".fact.md.swp")
			if err := os.WriteFile(tmp, []byte(editedFact), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, w.path("fact.md")); err != nil {
				t.Fatal(err)
			}
		}, "fact", "Edited."},
		{"new file", func(w *ws) { w.write("other.md", "New.\n") }, "other", "New."},
		{"delete", func(w *ws) {
			if err := os.Remove(w.path("fact.md")); err != nil {
				t.Fatal(err)
			}
		}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := watched(t)
			w.partial()
			w.sync() // the write's own events
			tc.edit(w)
			w.partial()
			scanned := w.dir.scannedAt
			w.sync()
			if !w.dir.scannedAt.Equal(scanned) {
				t.Fatal("the sync was a full scan")
			}
			if tc.key == "" {
				if _, err := w.peek("fact"); err == nil {
					t.Error("fact still there after its file was deleted")
				}
				return
			}
			if r, err := w.peek(tc.key); err != nil || r.Body != tc.body {
				t.Errorf("%s = %q, %v; want %q", tc.key, r.Body, err, tc.body)
			}
		})
	}
}

// TestWatchedEditRightAfterWrite is a person's save right after a tool's
// write of the same file, same size: the next sync imports it.
func TestWatchedEditRightAfterWrite(t *testing.T) {
	w := watched(t)
	w.put(memory.Semantic, "fact", "", "Bbb.")
	data := strings.Replace(string(w.read("fact.md")), "Bbb.", "Ccc.", 1)
	if err := os.WriteFile(w.path("fact.md"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	w.partial()
	w.sync()
	if r, err := w.peek("fact"); err != nil || r.Body != "Ccc." {
		t.Errorf("fact = %q, %v; want the edit", r.Body, err)
	}
}

// TestUnwatchedDirScans is a Dir whose watcher could not be started: an
// edit is seen all the same, by the full scan every sync does then.
func TestUnwatchedDirScans(t *testing.T) {
	w := newWS(t)
	w.dir.noWatch = true
	w.put(memory.Semantic, "fact", "", "Old.")
	w.sync()
	if w.dir.watcher != nil {
		t.Fatal("a watcher was started")
	}
	w.write("fact.md", editedFact)
	w.partial()
	w.sync()
	if r, err := w.peek("fact"); err != nil || r.Body != "Edited." {
		t.Errorf("fact = %q, %v; want the edit", r.Body, err)
	}
}

// TestWatcherLostIsScanned is a watcher that stops seeing the directory
// without a word, as where no event reaches this process: the change is
// seen by the full scan due every rescanEvery, and a watcher that stops
// answering its cookie is given up for full scans.
func TestWatcherLostIsScanned(t *testing.T) {
	w := watched(t)
	if err := w.dir.watcher.w.Remove(w.dir.Path()); err != nil {
		t.Fatal(err)
	}
	w.write("fact.md", editedFact)
	w.partial()
	w.sync()
	w.dir.scannedAt = time.Now().Add(-rescanEvery)
	w.sync()
	if r, err := w.peek("fact"); err != nil || r.Body != "Edited." {
		t.Errorf("fact = %q, %v; want the edit", r.Body, err)
	}

	if err := w.dir.watcher.w.Remove(w.path(tempSub)); err != nil {
		t.Fatal(err)
	}
	w.write("fact.md", strings.Replace(editedFact, "Edited.", "Again.", 1))
	w.partial()
	w.sync()
	if r, err := w.peek("fact"); err != nil || r.Body != "Again." {
		t.Errorf("fact = %q, %v; want the second edit", r.Body, err)
	}
	if w.dir.watcher != nil {
		t.Error("a watcher that did not answer is still used")
	}
}

// TestWatchedBurst is 2,000 files created at once: none is missed.
func TestWatchedBurst(t *testing.T) {
	w := watched(t)
	const n = 2000
	for i := range n {
		w.write(fmt.Sprintf("burst-%04d.md", i), fmt.Sprintf("Burst %d.\n", i))
	}
	w.partial()
	rep := w.sync()
	if len(rep.Imported) != n || len(rep.Problems) != 0 {
		t.Fatalf("imported %d of %d, problems %v", len(rep.Imported), n, rep.Problems)
	}
	if got := len(w.mirrored()); got != n+1 {
		t.Errorf("%d records, want %d", got, n+1)
	}
}

// TestCloseStopsWatcher: Close stops the watcher and removes its cookie;
// the Dir still syncs, by scanning.
func TestCloseStopsWatcher(t *testing.T) {
	w := watched(t)
	w.dir.Close()
	if w.dir.watcher != nil {
		t.Fatal("watcher still running after Close")
	}
	if got := tempCookies(t, w); len(got) != 0 {
		t.Errorf("cookies left: %v", got)
	}
	w.write("fact.md", editedFact)
	w.sync()
	if w.dir.watcher != nil {
		t.Error("a closed Dir started a watcher")
	}
	if r, err := w.peek("fact"); err != nil || r.Body != "Edited." {
		t.Errorf("fact = %q, %v; want the edit", r.Body, err)
	}
}

func tempCookies(t *testing.T, w *ws) []string {
	t.Helper()
	entries, err := os.ReadDir(w.path(tempSub))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if isCookie(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}
