package mirror

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// needSpares skips a test of files made ahead where none are made.
func needSpares(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("files are made ahead on Linux only")
	}
}

// spared waits until d holds files made ahead, and returns how many; it
// skips the test where the system cannot make them.
func spared(t *testing.T, d *Dir) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		d.spares.mu.Lock()
		n, making, off := len(d.spares.files), d.spares.making, d.spares.off
		d.spares.mu.Unlock()
		if off {
			t.Skip("files cannot be made ahead here")
		}
		if n > 0 && !making {
			return n
		}
	}
	t.Fatal("no file was made ahead")
	return 0
}

// wsMadeAhead is a workspace holding one fact, with files made ahead for
// the next write, or with none ever.
func wsMadeAhead(t *testing.T, ahead bool) *ws {
	t.Helper()
	w := newWS(t)
	w.put(memory.Semantic, "other", "", "Another fact.")
	if ahead {
		spared(t, w.dir)
	} else {
		w.dir.dropSpares(true)
	}
	return w
}

// tempEntries lists the temporary directory, its .gitignore left out.
func tempEntries(t *testing.T, w *ws) []string {
	t.Helper()
	entries, err := os.ReadDir(w.path(tempSub))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != ".gitignore" {
			names = append(names, e.Name())
		}
	}
	return names
}

func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

// TestWritesUseFilesMadeAhead: once the first write has made the
// directory, files are made ahead; new files and new versions of old ones
// take them, hold exactly what a write gives, with the mode a new file
// gets (or the one the old file had), and leave nothing in the temporary
// directory.
func TestWritesUseFilesMadeAhead(t *testing.T) {
	needSpares(t)
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	n := spared(t, w.dir)
	if n > sparesMade {
		t.Errorf("%d files made ahead, want at most %d", n, sparesMade)
	}
	rec := w.put(memory.Semantic, "second", "A second fact", "Made ahead.")
	if got := len(w.dir.spares.files); got >= n {
		t.Errorf("files made ahead after a write: %d, want fewer than %d", got, n)
	}
	if got, want := string(w.read("second.md")), string(Encode(rec)); got != want {
		t.Errorf("second.md = %q, want %q", got, want)
	}
	fi, err := os.Stat(w.path("second.md"))
	if err != nil || fi.Mode().Perm() != 0o644&^umask() {
		t.Errorf("second.md: %v, %v; want mode %v", fi.Mode(), err, 0o644&^umask())
	}

	// A new version keeps the old file's mode.
	if err := os.Chmod(w.path("second.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	spared(t, w.dir)
	if _, err := w.update("second", "A new version."); err != nil {
		t.Fatal(err)
	}
	if got, err := Decode("second", w.read("second.md")); err != nil || got.Body != "A new version." {
		t.Errorf("second.md = %q, %v", got.Body, err)
	}
	if fi, err := os.Stat(w.path("second.md")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("second.md after an update: %v, %v; want 0600", fi.Mode(), err)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	if rep := w.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync after the writes: %+v", rep)
	}

	// Many writes in a row, more than are made in one go.
	for i := range 3 * sparesMade {
		w.put(memory.Semantic, fmt.Sprintf("fact-%d", i), "", fmt.Sprintf("Fact %d.", i))
	}
	for i := range 3 * sparesMade {
		if got, err := Decode(fmt.Sprintf("fact-%d", i), w.read(fmt.Sprintf("fact-%d.md", i))); err != nil || got.Body != fmt.Sprintf("Fact %d.", i) {
			t.Errorf("fact-%d.md = %q, %v", i, got.Body, err)
		}
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}

// TestFileCreatedByHandAsAToolCreatesIt: a person creates the file of a
// new key between the server's look for it and its write. The person's
// file stays, the call is a conflict, and the next sync imports it; with
// files made ahead and without.
func TestFileCreatedByHandAsAToolCreatesIt(t *testing.T) {
	mine := "---\ntype: semantic\ndescription: \"Mine\"\n---\n\nWritten by hand.\n"
	for _, ahead := range []bool{false, true} {
		t.Run(fmt.Sprintf("made ahead %v", ahead), func(t *testing.T) {
			w := wsMadeAhead(t, ahead)
			w.dir.hook = func(at, key string) {
				if at == "checked" && key == "fact" {
					w.dir.hook = nil
					w.write("fact.md", mine)
				}
			}
			_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "fact", Body: "From a tool."})
			if !errors.Is(err, memory.ErrConflict) {
				t.Errorf("write: %v, want a conflict", err)
			}
			if got := string(w.read("fact.md")); got != mine {
				t.Errorf("fact.md = %q, want the person's", got)
			}
			if got := tempEntries(t, w); len(got) > 0 {
				t.Errorf("left in the temporary directory: %v", got)
			}
			w.sync()
			if r, err := w.peek("fact"); err != nil || r.Body != "Written by hand." {
				t.Errorf("fact after a sync = %q, %v", r.Body, err)
			}
		})
	}
}

// TestFilesMadeAheadOutliveTheDirectory: the memories directory removed
// and made again (a checkout, a person) after files were made ahead for
// it: the next writes land in the new one.
func TestFilesMadeAheadOutliveTheDirectory(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	if err := os.RemoveAll(w.dir.Path()); err != nil {
		t.Fatal(err)
	}
	w.sync() // the removal is imported
	if err := os.MkdirAll(w.dir.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	w.put(memory.Semantic, "second", "", "The second.")
	if got, err := Decode("second", w.read("second.md")); err != nil || got.Body != "The second." {
		t.Errorf("second.md = %q, %v", got.Body, err)
	}
}

// TestFileMadeAheadOnAnotherFileSystem: a file made ahead that cannot be
// linked into the directory (made on another file system, as when the
// directory became a mount) costs nothing but itself: the write makes
// its own file, and the rest made ahead are dropped.
func TestFileMadeAheadOnAnotherFileSystem(t *testing.T) {
	needSpares(t)
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	other, err := os.Open("/dev/shm")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	defer other.Close()
	var st1, st2 syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st1) != nil || syscall.Statfs(w.dir.Path(), &st2) != nil || st1.Fsid == st2.Fsid {
		t.Skip("/dev/shm is not another file system here")
	}
	f, err := makeSpare(other)
	if err != nil {
		t.Skip("cannot make a file ahead in /dev/shm:", err)
	}
	w.dir.spares.mu.Lock()
	w.dir.spares.files = append(w.dir.spares.files, f)
	w.dir.spares.mu.Unlock()
	w.put(memory.Semantic, "second", "", "The second.")
	if got, err := Decode("second", w.read("second.md")); err != nil || got.Body != "The second." {
		t.Errorf("second.md = %q, %v", got.Body, err)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	if f.Fd() != ^uintptr(0) {
		t.Error("the file made on another file system is still open")
	}
}

// TestCloseReleasesFilesMadeAhead: Close closes every file made ahead and
// makes no more; writes after it still work.
func TestCloseReleasesFilesMadeAhead(t *testing.T) {
	needSpares(t)
	w := newWS(t)
	before := openFiles(t)
	w.put(memory.Semantic, "first", "", "The first.")
	n := spared(t, w.dir)
	if got := openFiles(t); got < before+n {
		t.Errorf("%d files open with files made ahead, %d before", got, before)
	}
	w.dir.Close()
	w.put(memory.Semantic, "second", "", "The second.")
	time.Sleep(10 * time.Millisecond) // a refill, if one were started
	w.dir.spares.mu.Lock()
	n = len(w.dir.spares.files)
	w.dir.spares.mu.Unlock()
	if n > 0 {
		t.Errorf("%d files made ahead after Close", n)
	}
	if got := openFiles(t); got > before+1 { // the store's own may vary by one
		t.Errorf("%d files open after Close, %d before", got, before)
	}
	if _, err := os.Stat(w.path("second.md")); err != nil {
		t.Error(err)
	}
}

// openFiles counts this process's open files that have no name left (files
// made ahead among them).
func openFiles(t *testing.T) int {
	t.Helper()
	return fdsWhere(t, func(target string) bool { return strings.Contains(target, "(deleted)") })
}

// fdsWhere counts this process's open file descriptors whose target
// matches.
func fdsWhere(t *testing.T, match func(target string) bool) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && match(target) {
			n++
		}
	}
	return n
}

// TestNoFilesMadeAheadUnlessAsked: a Dir whose process did not ask for
// files made ahead (a command that writes once and exits) makes none.
func TestNoFilesMadeAheadUnlessAsked(t *testing.T) {
	w := newWS(t)
	d, err := Open(w.root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := memory.Project{ID: w.p, Mirror: d}
	for i := range 3 {
		if _, _, err := w.st.Put(w.ctx, p, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: fmt.Sprintf("fact-%d", i), Body: "Once."}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // a refill, if one were started
	d.spares.mu.Lock()
	n, making := len(d.spares.files), d.spares.making
	d.spares.mu.Unlock()
	if n > 0 || making {
		t.Errorf("%d files made ahead (a refill under way: %v) by a Dir not asked to", n, making)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	for i := range 3 {
		if got, err := Decode(fmt.Sprintf("fact-%d", i), w.read(fmt.Sprintf("fact-%d.md", i))); err != nil || got.Body != "Once." {
			t.Errorf("fact-%d.md = %q, %v", i, got.Body, err)
		}
	}
}

// TestFilesMadeAheadHoldOnlyTheirWrite: a file made ahead carries exactly
// its own write's bytes: bodies at the size limit and in scripts other
// than Latin, new files and new versions, and the writes after ones
// refused as conflicts (whose files made ahead were filled, then let go)
// never show another write's content.
func TestFilesMadeAheadHoldOnlyTheirWrite(t *testing.T) {
	w := wsMadeAhead(t, true)
	bodies := []string{
		strings.Repeat("日本語のメモ。", memory.MaxBodyBytes/len("日本語のメモ。")),
		"Ünïcödé — ✓ " + strings.Repeat("ж", 1000),
		"x",
	}
	for i, body := range bodies {
		key := fmt.Sprintf("big-%d", i)
		w.dir.hook = func(at, k string) {
			if at == "checked" && k == "taken-"+key {
				w.dir.hook = nil
				w.write(k+".md", "By hand.\n")
			}
		}
		if err := w.putErr("taken-"+key, body+" refused"); !errors.Is(err, memory.ErrConflict) {
			t.Fatalf("taken-%s: %v, want a conflict", key, err)
		}
		rec := w.put(memory.Semantic, key, "", body)
		if got, want := string(w.read(key+".md")), string(Encode(rec)); got != want {
			t.Errorf("%s.md: %d bytes, want the %d of its own write", key, len(got), len(want))
		}
		upd, err := w.update(key, strings.ToUpper(body))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(w.read(key+".md")), string(Encode(upd)); got != want {
			t.Errorf("%s.md after an update: %d bytes, want the %d of its own write", key, len(got), len(want))
		}
	}
	if rep := w.sync(); len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync: %+v", rep)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}

// TestRemoveDirectoryRightAfterAWrite: a person removes the memories
// directory (rm -r) the moment a write returns, while files are being
// made ahead: the removal goes through, and nothing makes the directory
// again behind their back.
func TestRemoveDirectoryRightAfterAWrite(t *testing.T) {
	w := wsMadeAhead(t, true)
	for i := range 40 {
		w.put(memory.Semantic, fmt.Sprintf("fact-%d", i), "", "Written, then removed by hand.")
		if err := os.RemoveAll(w.dir.Path()); err != nil {
			t.Fatalf("round %d: rm -r of the memories directory: %v", i, err)
		}
		refillDone(t, w.dir)
		if _, err := os.Lstat(w.dir.Path()); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("round %d: the removed directory is back: %v", i, err)
		}
		w.sync() // the removal is imported
	}
}

// TestFilesMadeAheadLinkOnAnOlderKernel: a kernel that refuses to link a
// descriptor by itself (before Linux 6.10, without CAP_DAC_READ_SEARCH)
// has each file made ahead linked through /proc instead, asked first from
// then on; the files hold exactly what the writes gave, and each is the
// file made ahead (one inode, no temporary file left).
func TestFilesMadeAheadLinkOnAnOlderKernel(t *testing.T) {
	needSpares(t)
	asked := 0
	refuseEmptyPath(t, &asked)
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	for i := range 3 {
		spared(t, w.dir)
		before := len(w.dir.spares.files)
		rec := w.put(memory.Semantic, fmt.Sprintf("fact-%d", i), "", fmt.Sprintf("Fact %d.", i))
		if got := len(w.dir.spares.files); got >= before {
			t.Errorf("write %d took no file made ahead: %d left of %d", i, got, before)
		}
		if got, want := string(w.read(fmt.Sprintf("fact-%d.md", i))), string(Encode(rec)); got != want {
			t.Errorf("fact-%d.md = %q, want %q", i, got, want)
		}
	}
	if asked != 1 {
		t.Errorf("the refused way was asked %d times, want once", asked)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	if rep := w.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync after the writes: %+v", rep)
	}
}

// TestTemporaryDirectoryRemovedBetweenWrites: a person removes the
// temporary directory, files made ahead in it and all, or only its
// .gitignore. The next writes still land whole, the directory and its
// .gitignore come back with the first named temporary file, and files
// are made ahead again.
func TestTemporaryDirectoryRemovedBetweenWrites(t *testing.T) {
	needSpares(t)
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	if err := os.RemoveAll(w.path(tempSub)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec := w.put(memory.Semantic, fmt.Sprintf("fact-%d", i), "", fmt.Sprintf("Fact %d.", i))
		if got, want := string(w.read(fmt.Sprintf("fact-%d.md", i))), string(Encode(rec)); got != want {
			t.Errorf("fact-%d.md = %q, want %q", i, got, want)
		}
	}
	if got := string(w.read(tempSub + "/.gitignore")); got != tempGitignore {
		t.Errorf(".tmp/.gitignore = %q, want %q", got, tempGitignore)
	}
	spared(t, w.dir)

	// The .gitignore alone: a file made ahead needs none, and the next
	// named temporary file (an update's) brings it back before it is made.
	if err := os.Remove(w.path(tempSub + "/.gitignore")); err != nil {
		t.Fatal(err)
	}
	w.put(memory.Semantic, "made-ahead", "", "Made ahead.")
	w.dir.dropSpares(false)
	w.dir.spares.mu.Lock()
	w.dir.spares.off = true // named temporary files from here
	w.dir.spares.mu.Unlock()
	if _, err := w.update("made-ahead", "A new version."); err != nil {
		t.Fatal(err)
	}
	if got := string(w.read(tempSub + "/.gitignore")); got != tempGitignore {
		t.Errorf(".tmp/.gitignore after an update = %q, want %q", got, tempGitignore)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}

// TestFilesMadeAheadHoldLargeNonASCIIFacts: a fact as large as a body may
// be, in scripts of several bytes a character, and a fact of one word, are
// written through files made ahead and read back through their own
// descriptors: each file holds exactly its write, and the next sync (of
// this process and of another) imports and reports nothing.
func TestFilesMadeAheadHoldLargeNonASCIIFacts(t *testing.T) {
	needSpares(t)
	w := newWS(t)
	other := newWSAt(t, w.root, w.st)
	w.put(memory.Semantic, "first", "", "The first.")
	w.sync()
	other.sync()
	unit := "日本語のメモ、Ünïcödé ✓ "
	big := strings.Repeat(unit, memory.MaxBodyBytes/len(unit)-1)
	for key, body := range map[string]string{"large": big, "small": "Ja."} {
		n := spared(t, w.dir)
		rec := w.put(memory.Semantic, key, "Ünïcödé", body)
		if left := len(w.dir.spares.files); left >= n {
			t.Errorf("%s: the write took no file made ahead", key)
		}
		if got, want := string(w.read(key+".md")), string(Encode(rec)); got != want {
			t.Errorf("%s.md holds %d bytes, want the write's %d", key, len(got), len(want))
		}
		// Read back whole, the file is recorded as this write's: trusted
		// by its times from now on (a read-back that differed records no
		// change time).
		if state, err := w.st.MirrorState(w.ctx, w.p); err != nil || looksStamped(state[key].MTime) && state[key].CTime == 0 {
			t.Errorf("%s: recorded %+v, %v; want its change time kept", key, state[key], err)
		}
	}
	for _, x := range []*ws{w, other} {
		if rep := x.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted)+len(rep.Renamed) > 0 {
			t.Errorf("sync after the writes: %+v", rep)
		}
	}
}
