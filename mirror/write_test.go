package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

func (w *ws) putErr(key, body string) error {
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: body})
	return err
}

// tempEntries lists the temporary directory, its .gitignore and a
// watcher's cookie left out.
func tempEntries(t *testing.T, w *ws) []string {
	t.Helper()
	entries, err := os.ReadDir(w.path(tempSub))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != ".gitignore" && !isCookie(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestFileCreatedByHandAsAToolCreatesIt: a person creates the file of a
// new key between the server's look for it and its write. The person's
// file stays, the call is a conflict, and the next sync imports it.
func TestFileCreatedByHandAsAToolCreatesIt(t *testing.T) {
	mine := "---\ntype: semantic\ndescription: \"Mine\"\n---\n\nWritten by hand.\n"
	w := newWS(t)
	w.dir.hook = func(at, key string) {
		if at == "checked" && key == "fact" {
			w.dir.hook = nil
			w.write("fact.md", mine)
		}
	}
	if err := w.putErr("fact", "From a tool."); !errors.Is(err, memory.ErrConflict) {
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
}

// TestNameTakenBySymlinkOrDirectory: between the look for a new fact's
// file and its link, a person puts a symlink (to a file outside the
// workspace) or a directory at its name. Nothing is written through or
// over them; the call is a conflict.
func TestNameTakenBySymlinkOrDirectory(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.md")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(p string) error
		want func(fi fs.FileInfo) bool
	}{
		{"symlink", func(p string) error { return os.Symlink(outside, p) }, func(fi fs.FileInfo) bool { return fi.Mode()&fs.ModeSymlink != 0 }},
		{"dangling symlink", func(p string) error { return os.Symlink(p+".nowhere", p) }, func(fi fs.FileInfo) bool { return fi.Mode()&fs.ModeSymlink != 0 }},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, func(fi fs.FileInfo) bool { return fi.IsDir() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t)
			w.dir.hook = func(at, key string) {
				if at == "checked" && key == "fact" {
					w.dir.hook = nil
					if err := tc.make(w.path("fact.md")); err != nil {
						t.Error(err)
					}
				}
			}
			if err := w.putErr("fact", "From a tool."); !errors.Is(err, memory.ErrConflict) {
				t.Errorf("write: %v, want a conflict", err)
			}
			fi, err := os.Lstat(w.path("fact.md"))
			if err != nil || !tc.want(fi) {
				t.Errorf("fact.md: %v, %v; want the person's %s", fi, err, tc.name)
			}
			if b, _ := os.ReadFile(outside); string(b) != "outside" {
				t.Errorf("the file outside the workspace now holds %q", b)
			}
			if got := tempEntries(t, w); len(got) > 0 {
				t.Errorf("left in the temporary directory: %v", got)
			}
		})
	}
}

// TestNewFactMeetsAFileNoSyncSaw: a file, a symlink or a directory a
// person put at a new fact's name before the write began, which no sync
// saw, stays as it is, and the write is a conflict that says what is
// there; nothing is left in the temporary directory.
func TestNewFactMeetsAFileNoSyncSaw(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.md")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, says string
		make       func(p string) error
	}{
		{"file", "was edited by hand", func(p string) error { return os.WriteFile(p, []byte("---\ntype: semantic\n---\nA person's.\n"), 0o644) }},
		{"symlink", "not a regular file", func(p string) error { return os.Symlink(outside, p) }},
		{"directory", "not a regular file", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t)
			if err := os.MkdirAll(w.dir.Path(), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(w.path("fact.md")); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(w.path("fact.md"))
			err := w.putErr("fact", "From a tool.")
			if !errors.Is(err, memory.ErrConflict) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("write: %v, want a conflict saying %q", err, tc.says)
			}
			after, err := os.Lstat(w.path("fact.md"))
			if err != nil || !os.SameFile(before, after) || after.ModTime() != before.ModTime() {
				t.Errorf("fact.md: %v, %v; want the person's %s untouched", after, err, tc.name)
			}
			if b, _ := os.ReadFile(outside); string(b) != "outside" {
				t.Errorf("the file outside the workspace now holds %q", b)
			}
			if _, err := w.st.Get(w.ctx, w.p, memory.Selector{Key: "fact"}); !errors.Is(err, memory.ErrNotFound) {
				t.Errorf("the refused fact is stored: %v", err)
			}
			if got := tempEntries(t, w); len(got) > 0 {
				t.Errorf("left in the temporary directory: %v", got)
			}
		})
	}
}

// TestDirectoryReplacedBySymlinkInside: the memories directory is replaced
// under a running server by a symlink to another directory of the
// workspace (allowed). New facts land in the target.
func TestDirectoryReplacedBySymlinkInside(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	target := filepath.Join(w.root, "elsewhere")
	if err := os.Rename(w.dir.Path(), target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../elsewhere", w.dir.Path()); err != nil {
		t.Fatal(err)
	}
	w.put(memory.Semantic, "second", "", "Through the symlink.")
	if r, err := Decode("second", w.read("second.md")); err != nil || r.Body != "Through the symlink." {
		t.Errorf("second.md = %q, %v", r.Body, err)
	}
	if _, err := os.Stat(filepath.Join(target, "second.md")); err != nil {
		t.Errorf("not in the symlink's target: %v", err)
	}
	if rep := w.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync: %+v", rep)
	}
}

// TestDirectoryReplacedBySymlinkOutside: the memories directory is moved
// out of the workspace under a running server and a symlink to it put in
// its place. Writes are refused; nothing is written in the directory
// outside.
func TestDirectoryReplacedBySymlinkOutside(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	outside := filepath.Join(t.TempDir(), "memories")
	if err := os.Rename(w.dir.Path(), outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, w.dir.Path()); err != nil {
		t.Fatal(err)
	}
	if err := w.putErr("second", "Must not land outside."); err == nil {
		t.Error("a write through a symlink leading out of the workspace succeeded")
	}
	if _, err := os.Lstat(filepath.Join(outside, "second.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second.md outside the workspace: %v", err)
	}
}

// TestWorkspaceDeletedAndMadeAgain: the workspace is deleted under a
// running server, then made again at the same path (a fresh clone).
// Writes fail while it is gone and land in the new one after.
func TestWorkspaceDeletedAndMadeAgain(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	if err := os.RemoveAll(w.root); err != nil {
		t.Fatal(err)
	}
	if err := w.putErr("second", "Nowhere."); err == nil {
		t.Error("a write into a deleted workspace succeeded")
	}
	if _, err := os.Lstat(w.root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the deleted workspace was made again by a write: %v", err)
	}
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		t.Fatal(err)
	}
	w.sync()
	w.put(memory.Semantic, "third", "", "In the new one.")
	if r, err := Decode("third", w.read("third.md")); err != nil || r.Body != "In the new one." {
		t.Errorf("third.md = %q, %v", r.Body, err)
	}
}

// TestRemoveDirectoryRightAfterAWrite: a person removes the memories
// directory (rm -r) the moment a write returns: the removal goes through,
// and nothing makes the directory again behind their back.
func TestRemoveDirectoryRightAfterAWrite(t *testing.T) {
	w := newWS(t)
	for i := range 10 {
		w.put(memory.Semantic, fmt.Sprintf("fact-%d", i), "", "Written, then removed by hand.")
		if err := os.RemoveAll(w.dir.Path()); err != nil {
			t.Fatalf("round %d: rm -r of the memories directory: %v", i, err)
		}
		if _, err := os.Lstat(w.dir.Path()); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("round %d: the removed directory is back: %v", i, err)
		}
		w.sync() // the removal is imported
	}
}

// TestTemporaryDirectoryRemovedBetweenWrites: a person removes the
// temporary directory, or only its .gitignore. The next writes still land
// whole, and the directory and its .gitignore come back with them.
func TestTemporaryDirectoryRemovedBetweenWrites(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
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
	if err := os.Remove(w.path(tempSub + "/.gitignore")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.update("first", "A new version."); err != nil {
		t.Fatal(err)
	}
	if got := string(w.read(tempSub + "/.gitignore")); got != tempGitignore {
		t.Errorf(".tmp/.gitignore after an update = %q, want %q", got, tempGitignore)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}

// TestLargeNonASCIIFactsWrittenWhole: a fact as large as a body may be, in
// scripts of several bytes a character, and a fact of one word: each file
// holds exactly its write, and the next sync (of this process and of
// another) imports and reports nothing.
func TestLargeNonASCIIFactsWrittenWhole(t *testing.T) {
	w := newWS(t)
	other := newWSAt(t, w.root, w.st)
	w.put(memory.Semantic, "first", "", "The first.")
	w.sync()
	other.sync()
	unit := "日本語のメモ、Ünïcödé ✓ "
	big := strings.Repeat(unit, memory.MaxBodyBytes/len(unit)-1)
	for key, body := range map[string]string{"large": big, "small": "Ja."} {
		rec := w.put(memory.Semantic, key, "Ünïcödé", body)
		if got, want := string(w.read(key+".md")), string(Encode(rec)); got != want {
			t.Errorf("%s.md holds %d bytes, want the write's %d", key, len(got), len(want))
		}
	}
	for _, x := range []*ws{w, other} {
		if rep := x.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted)+len(rep.Renamed) > 0 {
			t.Errorf("sync after the writes: %+v", rep)
		}
	}
}

// TestCancelledUpdateKeepsModeAndMtime: a new version written, then rolled
// back (the call cancelled before the commit): the old file comes back
// with its bytes, mode and mtime.
func TestCancelledUpdateKeepsModeAndMtime(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "fact", "", "Old.")
	if err := os.Chmod(w.path("fact.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(w.path("fact.md"), old, old); err != nil {
		t.Fatal(err)
	}
	w.sync()
	before := string(w.read("fact.md"))
	ctx := w.cancelAt(1)
	if _, _, err := w.st.Put(ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "fact", Body: "New."}); !errors.Is(err, context.Canceled) {
		t.Fatalf("update: %v, want it cancelled", err)
	}
	if got := string(w.read("fact.md")); got != before {
		t.Errorf("fact.md = %q, want %q", got, before)
	}
	fi, err := os.Stat(w.path("fact.md"))
	if err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(old) {
		t.Errorf("fact.md: %v, %v, %v; want 0600 and %v", fi.Mode(), fi.ModTime(), err, old)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}
