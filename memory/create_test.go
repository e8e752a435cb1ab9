package memory

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A database path that is a symlink to a file not yet made (a dotfile
// pointing into a directory of the user's choosing) gets that file made
// 0600 like any new database, not as SQLite would make it, readable by
// others under the usual umask.
func TestOpenThroughDanglingSymlinkMakesFilePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file modes")
	}
	defer setUmask(setUmask(0o022))
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "real", "memory.db")
	link := filepath.Join(dir, "memory.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s, err := openTarget(ctx, link, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, projA, Write{Type: Semantic, Key: "k", Body: "a body"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(target)
	if err != nil {
		t.Fatalf("the symlink's target was not made: %v", err)
	}
	if m := fi.Mode(); !m.IsRegular() || m.Perm() != 0o600 {
		t.Fatalf("the database was made %v, want a regular file -rw-------", m)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v %v", fi, err)
	}
}

// An existing database the user may not write is refused at Open with
// the advice to make it writable, as when Open opened it to check, not
// opened read-only to fail at the first write. (Root may write it
// anyway: the test needs another user.)
func TestOpenReadOnlyFileAdvises(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("needs a user that file modes apply to")
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	s, err = openTarget(ctx, path, nil)
	if err == nil {
		s.Close()
		t.Fatal("Open of a read-only database succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "permission denied") || !strings.Contains(msg, "chmod") {
		t.Fatalf("%q does not name the file and say what to do", msg)
	}
}

// Several processes open one new database at the same moment, each
// writing a record: each succeeds, the file is made once, 0600, and
// holds every record, soundly.
func TestOpenNewFromProcessesAtOnce(t *testing.T) {
	if path := os.Getenv("MEMORY_TEST_CREATE_DB"); path != "" {
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, projA, Write{Type: Semantic, Key: "opener-" + os.Getenv("MEMORY_TEST_CREATE_N"), Body: "opened at once"})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no file modes")
	}
	defer setUmask(setUmask(0o022))
	const n = 4
	for round := range 3 {
		path := filepath.Join(t.TempDir(), "memory.db")
		cmds := make([]*exec.Cmd, n)
		outs := make([]strings.Builder, n)
		for i := range cmds {
			cmds[i] = exec.Command(os.Args[0], "-test.run=^TestOpenNewFromProcessesAtOnce$", "-test.count=1")
			cmds[i].Env = append(os.Environ(), "MEMORY_TEST_CREATE_DB="+path, fmt.Sprintf("MEMORY_TEST_CREATE_N=%d", i))
			cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("round %d, opener %d: %v\n%s", round, i, err, outs[i].String())
			}
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: database %v %v, want mode 0600", round, fi, err)
		}
		s, err := openTarget(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var check string
		var records int
		s.db.QueryRow("PRAGMA integrity_check").Scan(&check)
		s.db.QueryRow("SELECT count(*) FROM records").Scan(&records)
		s.Close()
		if check != "ok" || records != n {
			t.Fatalf("round %d: integrity %q, %d records, want %d", round, check, records, n)
		}
	}
}
