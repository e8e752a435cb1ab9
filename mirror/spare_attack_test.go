//go:build linux

package mirror

// Attacks on the files made ahead (spare.go): each test is one way a
// person, the system or a careless caller can get in the way of them.
// Tests that need a mount or a seccomp filter re-run themselves in a child
// process (in its own mount namespace for mounts), so that nothing they do
// reaches the rest of the machine or of this test binary.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// fdsUnder counts this process's open file descriptors whose target lies
// under dir (files made ahead show as dir/#<inode> (deleted)).
func fdsUnder(t *testing.T, dir string) int {
	t.Helper()
	return fdsWhere(t, func(target string) bool { return strings.HasPrefix(target, dir+"/") })
}

// refillDone waits until no refill is under way.
func refillDone(t *testing.T, d *Dir) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		d.spares.mu.Lock()
		making := d.spares.making
		d.spares.mu.Unlock()
		if !making {
			return
		}
	}
	t.Fatal("a refill never ended")
}

func (w *ws) putErr(key, body string) error {
	_, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: body})
	return err
}

// child runs the calling test again in a child process, with
// MIRROR_ATTACK_CHILD set to its name, under unshare -m when mount is
// set, and reports its failures. It returns true in the child, where the
// test does its work.
func child(t *testing.T, mount bool) bool {
	t.Helper()
	if os.Getenv("MIRROR_ATTACK_CHILD") == t.Name() {
		return true
	}
	args := []string{os.Args[0], "-test.run=^" + t.Name() + "$", "-test.count=1", "-test.v"}
	if mount {
		if os.Geteuid() != 0 {
			t.Skip("mounts need root")
		}
		if err := exec.Command("unshare", "-m", "--propagation", "private", "true").Run(); err != nil {
			t.Skip("no private mount namespace here:", err)
		}
		args = append([]string{"unshare", "-m", "--propagation", "private"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "MIRROR_ATTACK_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP"):
		t.Skip(string(out))
	case err != nil:
		t.Errorf("in a child process: %v\n%s", err, out)
	default:
		t.Log(string(out))
	}
	return false
}

// ---------------------------------------------------------------------
// Modes and ownership: a file made ahead is made long before the write.

// TestAttackSetgidDirectoryAfterFilesMadeAhead: a person makes the
// memories directory and its temporary directory group-shared (chgrp -R
// and chmod g+s on both, so that new files take the directories' group)
// while the server runs. A new fact's file should take that group, as any
// file created there does, and as the named temporary file does; a file
// made ahead keeps the group it got when it was made.
func TestAttackSetgidDirectoryAfterFilesMadeAhead(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	const gid = 4242
	if os.Getegid() == gid {
		t.Skip("already in the group")
	}
	if err := os.MkdirAll(w.path(tempSub), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{w.dir.Path(), w.path(tempSub)} {
		if err := os.Chown(d, -1, gid); err != nil {
			t.Skip("cannot change the directory's group:", err)
		}
		if err := os.Chmod(d, 0o755|fs.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	w.put(memory.Semantic, "ahead", "", "With a file made ahead.")
	w.dir.dropSpares(true)
	w.put(memory.Semantic, "named", "", "With a named temporary file.")
	for _, name := range []string{"ahead.md", "named.md"} {
		fi, err := os.Stat(w.path(name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Sys().(*syscall.Stat_t).Gid; got != gid {
			t.Errorf("%s: group %d, want the setgid directory's %d", name, got, gid)
		}
	}
}

// ---------------------------------------------------------------------
// Turned off for good by a passing failure.

// TestAttackFilesMadeAheadComeBackAfterATransientFailure: the memories
// directory is made immutable for a moment (chattr +i, as a backup tool or
// a person guarding it might; a read-only remount acts the same). Writes
// fail meanwhile, as they must. Once it is writable again, files should be
// made ahead again: the "off" state is meant for "the system cannot make
// or link them", not for a directory that refused one write.
func TestAttackFilesMadeAheadComeBackAfterATransientFailure(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	if out, err := exec.Command("chattr", "+i", w.dir.Path()).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", w.dir.Path()).Run() })
	if err := w.putErr("refused", "Not now."); err == nil {
		t.Fatal("a write into an immutable directory succeeded")
	}
	refillDone(t, w.dir)
	if out, err := exec.Command("chattr", "-i", w.dir.Path()).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	for i := range 3 {
		w.put(memory.Semantic, fmt.Sprintf("after-%d", i), "", "Writable again.")
		refillDone(t, w.dir)
	}
	w.dir.spares.mu.Lock()
	n, off := len(w.dir.spares.files), w.dir.spares.off
	w.dir.spares.mu.Unlock()
	if off || n == 0 {
		t.Errorf("after the directory is writable again: %d files made ahead, off %v; want them made again", n, off)
	}
}

// ---------------------------------------------------------------------
// Close while a refill runs, and fds.

// TestAttackCloseWhileARefillWaits: the refill is held up in Blocking (the
// server lends it a processor) and the Dir is closed meanwhile; it then
// runs. Nothing may be left made ahead or open after it ends.
func TestAttackCloseWhileARefillWaits(t *testing.T) {
	w := newWS(t)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	w.dir.MakeFilesAhead(func(work func()) {
		wg.Add(1)
		defer wg.Done()
		<-gate
		work()
	})
	w.put(memory.Semantic, "first", "", "The first.") // starts a refill, held at the gate
	w.dir.Close()
	close(gate)
	refillDone(t, w.dir)
	wg.Wait()
	w.dir.spares.mu.Lock()
	n := len(w.dir.spares.files)
	w.dir.spares.mu.Unlock()
	if n != 0 {
		t.Errorf("%d files made ahead after Close", n)
	}
	if got := fdsUnder(t, w.dir.Path()); got != 0 {
		t.Errorf("%d files open in the memories directory after Close and the refill", got)
	}
}

// TestAttackCloseRacesRefills: Close races refills under way, many times.
func TestAttackCloseRacesRefills(t *testing.T) {
	for i := range 30 {
		w := newWS(t)
		w.put(memory.Semantic, "first", "", "The first.")
		if i%2 == 0 {
			runtime.Gosched()
		}
		w.dir.Close()
		refillDone(t, w.dir)
		w.dir.spares.mu.Lock()
		n := len(w.dir.spares.files)
		w.dir.spares.mu.Unlock()
		if n != 0 {
			t.Fatalf("round %d: %d files made ahead after Close", i, n)
		}
		if got := fdsUnder(t, w.dir.Path()); got != 0 {
			t.Fatalf("round %d: %d files open in the memories directory after Close", i, got)
		}
		// Writes still work after Close, with named files.
		w.put(memory.Semantic, "second", "", "After Close.")
		if got := tempEntries(t, w); len(got) > 0 {
			t.Fatalf("left in the temporary directory: %v", got)
		}
	}
}

// TestAttackConflictsLeakNoFiles: a new fact's write refused many times
// because a person's file took its name (EEXIST from the link) leaves no
// file open and nothing in the temporary directory.
func TestAttackConflictsLeakNoFiles(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
	for i := range 3 * sparesMade {
		key := fmt.Sprintf("taken-%d", i)
		w.dir.hook = func(at, k string) {
			if at == "checked" && k == key {
				w.dir.hook = nil
				w.write(key+".md", "not a memory")
			}
		}
		if err := w.putErr(key, "From a tool."); !errors.Is(err, memory.ErrConflict) {
			t.Fatalf("%s: %v, want a conflict", key, err)
		}
		if got := string(w.read(key + ".md")); got != "not a memory" {
			t.Fatalf("%s.md = %q, the person's file was replaced", key, got)
		}
	}
	refillDone(t, w.dir)
	w.dir.Close()
	refillDone(t, w.dir)
	if got := fdsUnder(t, w.dir.Path()); got != 0 {
		t.Errorf("%d files open in the memories directory after Close", got)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}

// TestAttackDroppedDirReleasesFilesMadeAhead: a Dir dropped without Close
// (the watch has a cleanup for that case) must not keep its files made
// ahead open for good.
func TestAttackDroppedDirReleasesFilesMadeAhead(t *testing.T) {
	root := t.TempDir()
	st := mustOpen(t, filepath.Join(t.TempDir(), "memory.db"))
	mem := filepath.Join(root, filepath.FromSlash(relDir))
	func() {
		d, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		d.MakeFilesAhead(nil)
		p := memory.Project{ID: scope.IdentityOf(root), Mirror: d}
		if _, _, err := st.Put(context.Background(), p, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "first", Body: "The first."}); err != nil {
			t.Fatal(err)
		}
		spared(t, d)
	}()
	if fdsUnder(t, mem) == 0 {
		t.Fatal("no file made ahead to drop")
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && fdsUnder(t, mem) > 0; time.Sleep(10 * time.Millisecond) {
		runtime.GC()
	}
	if got := fdsUnder(t, mem); got != 0 {
		t.Errorf("%d files made ahead still open after the Dir was dropped", got)
	}
}

// ---------------------------------------------------------------------
// Writes faster than the refill.

// TestAttackManyWritesFasterThanTheRefill: goroutines write new facts and
// new versions, with syncs in between, faster than files are made ahead.
// Every file holds its write, nothing is left in the temporary directory,
// the pool never holds more than sparesMade, and Close leaves nothing
// open.
func TestAttackManyWritesFasterThanTheRefill(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	const writers, each = 4, 30
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*2+each)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("w%d-%d", g, i)
				if _, _, err := w.st.Put(w.ctx, w.project(), memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: "v1 " + key}); err != nil {
					errs <- fmt.Errorf("put %s: %w", key, err)
					continue
				}
				if i%3 == 0 {
					if _, err := w.update(key, "v2 "+key); err != nil {
						errs <- fmt.Errorf("update %s: %w", key, err)
					}
				}
				w.dir.spares.mu.Lock()
				n := len(w.dir.spares.files)
				w.dir.spares.mu.Unlock()
				if n > sparesMade {
					errs <- fmt.Errorf("%d files made ahead, at most %d", n, sparesMade)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range each {
			if _, err := Sync(w.ctx, w.st, w.p, w.dir); err != nil {
				errs <- fmt.Errorf("sync: %w", err)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for g := range writers {
		for i := range each {
			key := fmt.Sprintf("w%d-%d", g, i)
			want := "v1 " + key
			if i%3 == 0 {
				want = "v2 " + key
			}
			if r, err := Decode(key, w.read(key+".md")); err != nil || r.Body != want {
				t.Errorf("%s.md = %q, %v; want %q", key, r.Body, err, want)
			}
		}
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	if rep := w.sync(); len(rep.Imported)+len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync after the writes: %+v", rep)
	}
	w.dir.Close()
	refillDone(t, w.dir)
	if got := fdsUnder(t, w.dir.Path()); got != 0 {
		t.Errorf("%d files open in the memories directory after Close", got)
	}
}

// ---------------------------------------------------------------------
// A person's file, a symlink, a directory, taking the name.

// TestAttackNameTakenBySymlinkOrDirectory: between the look for a new
// fact's file and its link, a person puts a symlink (to a file outside the
// workspace) or a directory at its name. Nothing is written through or
// over them; the call is a conflict.
func TestAttackNameTakenBySymlinkOrDirectory(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.md")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(w *ws, p string) error
		want func(fi fs.FileInfo) bool
	}{
		{"symlink", func(w *ws, p string) error { return os.Symlink(outside, p) }, func(fi fs.FileInfo) bool { return fi.Mode()&fs.ModeSymlink != 0 }},
		{"dangling symlink", func(w *ws, p string) error { return os.Symlink(p+".nowhere", p) }, func(fi fs.FileInfo) bool { return fi.Mode()&fs.ModeSymlink != 0 }},
		{"directory", func(w *ws, p string) error { return os.Mkdir(p, 0o755) }, func(fi fs.FileInfo) bool { return fi.IsDir() }},
	} {
		for _, ahead := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s made ahead %v", tc.name, ahead), func(t *testing.T) {
				w := wsMadeAhead(t, ahead)
				w.dir.hook = func(at, key string) {
					if at == "checked" && key == "fact" {
						w.dir.hook = nil
						if err := tc.make(w, w.path("fact.md")); err != nil {
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
}

// ---------------------------------------------------------------------
// The directory removed, moved, replaced by a symlink; the workspace gone.

// TestAttackDirectoryReplacedBySymlinkInside: after files were made ahead,
// the memories directory is replaced by a symlink to another directory
// of the workspace (allowed). New facts land in the target.
func TestAttackDirectoryReplacedBySymlinkInside(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
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

// TestAttackDirectoryReplacedBySymlinkOutside: after files were made
// ahead, the memories directory is moved out of the workspace and a
// symlink to it put in its place. Writes are refused; nothing is
// written in the directory outside.
func TestAttackDirectoryReplacedBySymlinkOutside(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
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

// TestAttackWorkspaceDeletedAndMadeAgain: the workspace is deleted while
// files made ahead are held, then made again at the same path (a fresh
// clone). Writes fail while it is gone and land in the new one after.
func TestAttackWorkspaceDeletedAndMadeAgain(t *testing.T) {
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	spared(t, w.dir)
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

// TestAttackCancelledUpdateWithAFileMadeAhead: a new version written with
// a file made ahead, then rolled back (the call cancelled before the
// commit): the old file comes back with its bytes, mode and mtime.
func TestAttackCancelledUpdateWithAFileMadeAhead(t *testing.T) {
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
	spared(t, w.dir)
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

// ---------------------------------------------------------------------
// Other file systems (in a child process, in its own mount namespace).

// TestAttackFilesMadeAheadPinTheFileSystem: the workspace is on its own
// file system (a USB drive, a tmpfs, a container volume). The person
// removes the workspace and unmounts it. The files made ahead, held open,
// would make the unmount fail with EBUSY: they are let go as soon as a
// write finds the directory gone, and otherwise once writes have stopped
// for sparesIdle.
func TestAttackFilesMadeAheadPinTheFileSystem(t *testing.T) {
	if !child(t, true) {
		return
	}
	for _, write := range []bool{true, false} {
		mnt := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
			t.Skip("cannot mount a tmpfs:", err)
		}
		defer syscall.Unmount(mnt, syscall.MNT_DETACH)
		root := filepath.Join(mnt, "ws")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		w := newWSAt(t, root, mustOpen(t, filepath.Join(t.TempDir(), "memory.db")))
		w.dir.spares.keep = 200 * time.Millisecond
		w.put(memory.Semantic, "first", "", "The first.")
		spared(t, w.dir)
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if write {
			if err := w.putErr("second", "The workspace is gone."); err == nil {
				t.Error("a write into a deleted workspace succeeded")
			}
			if err := syscall.Unmount(mnt, 0); err != nil {
				t.Errorf("unmount after a write found the workspace gone: %v (%d files open under it)", err, fdsUnder(t, mnt))
			}
			continue
		}
		var err error
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if err = syscall.Unmount(mnt, 0); err == nil {
				break
			}
		}
		if err != nil {
			t.Errorf("unmount %v after the last write: %v (%d files open under it)", 5*time.Second, err, fdsUnder(t, mnt))
		}
	}
}

// TestAttackDirectoryBecomesAMount: after files were made ahead, another
// file system is mounted on the memories directory. New facts and new
// versions are written in it, nothing is left in its temporary directory,
// and the files made ahead for the old one are let go.
func TestAttackDirectoryBecomesAMount(t *testing.T) {
	if !child(t, true) {
		return
	}
	w := newWS(t)
	w.put(memory.Semantic, "first", "", "The first.")
	w.put(memory.Semantic, "kept", "", "Kept.")
	spared(t, w.dir)
	var old syscall.Stat_t
	if err := syscall.Stat(w.dir.Path(), &old); err != nil {
		t.Fatal(err)
	}
	// What the directory held, copied onto the new file system.
	saved := map[string][]byte{"first.md": w.read("first.md"), "kept.md": w.read("kept.md")}
	if err := syscall.Mount("tmpfs", w.dir.Path(), "tmpfs", 0, "size=16m,mode=755"); err != nil {
		t.Skip("cannot mount a tmpfs:", err)
	}
	defer syscall.Unmount(w.dir.Path(), syscall.MNT_DETACH)
	for name, b := range saved {
		if err := os.WriteFile(w.path(name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.put(memory.Semantic, "second", "", "On the mount.")
	if _, err := w.update("kept", "New version on the mount."); err != nil {
		t.Fatal(err)
	}
	if r, err := Decode("second", w.read("second.md")); err != nil || r.Body != "On the mount." {
		t.Errorf("second.md = %q, %v", r.Body, err)
	}
	if r, err := Decode("kept", w.read("kept.md")); err != nil || r.Body != "New version on the mount." {
		t.Errorf("kept.md = %q, %v", r.Body, err)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
	refillDone(t, w.dir)
	// Every file made ahead now is on the mount.
	w.dir.spares.mu.Lock()
	for _, f := range w.dir.spares.files {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err == nil && st.Dev == old.Dev {
			t.Errorf("a file made ahead on the old file system is still held")
		}
	}
	w.dir.spares.mu.Unlock()
	if rep := w.sync(); len(rep.Problems)+len(rep.Deleted) > 0 {
		t.Errorf("sync: %+v", rep)
	}
}

// ---------------------------------------------------------------------
// A file system without hard links.

// denyLinks installs a seccomp filter on every thread of this process
// that makes link(2) and linkat(2) fail with EPERM, as they do on a file
// system without hard links (vfat, exfat, FUSE file systems that do not
// implement link). rename(2) is untouched.
func denyLinks(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the filter is written for amd64")
	}
	const sysLink = 86 // link(2) on amd64
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the syscall number
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 2, Jf: 0, K: unix.SYS_LINKAT},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: sysLink},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Skip("no_new_privs:", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		t.Skip("seccomp:", e)
	}
}

// TestAttackNoHardLinks: on a file system where link(2) fails but
// rename(2) works, a new fact's file was written before this change (a
// temporary file renamed into place). Now the only ways in are a link
// (of a file made ahead, or of the named temporary file), so every new
// fact fails.
func TestAttackNoHardLinks(t *testing.T) {
	if !child(t, false) {
		return
	}
	w := newWS(t)
	denyLinks(t)
	// The file system as simulated: rename works, link does not.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatalf("rename under the filter: %v", err)
	}
	if err := os.Link(filepath.Join(dir, "b"), filepath.Join(dir, "c")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("link under the filter: %v, want EPERM", err)
	}
	// Both ways: before any file is made ahead, and with them.
	if err := w.putErr("first", "The first."); err != nil {
		t.Errorf("new fact, with a named temporary file: %v", err)
	}
	refillDone(t, w.dir)
	if err := w.putErr("second", "The second."); err != nil {
		t.Errorf("new fact, files made ahead: %v", err)
	}
	if got := tempEntries(t, w); len(got) > 0 {
		t.Errorf("left in the temporary directory: %v", got)
	}
}

// TestNewFactMeetsAFileNoSyncSaw: a new fact's write looks at its name
// only when linking its file in fails. A file, a symlink or a directory a
// person put at the name before the write began, which no sync saw, stays
// as it is, and the write is a conflict that says what is there; a file
// or directory made ahead is not left behind.
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
		for _, ahead := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s made ahead %v", tc.name, ahead), func(t *testing.T) {
				w := wsMadeAhead(t, ahead)
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
}
