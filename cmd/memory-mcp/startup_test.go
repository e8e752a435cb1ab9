package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startFails runs the server with e, expecting it to refuse to start: a
// non-zero exit, nothing on stdout, and a short message on stderr that
// names want (a path) and contains every phrase of advice. It returns the
// message.
func startFails(t *testing.T, e env, wrap []string, want string, advice ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	if len(wrap) > 0 {
		cmd = exec.CommandContext(ctx, wrap[0], append(wrap[1:], binary)...)
	} else {
		cmd = exec.CommandContext(ctx, binary)
	}
	cmd.Env, cmd.Dir = e.vars(), e.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A server that does start waits on stdin; give it an initialize so a
	// wrong start shows as a success, not a hang.
	cmd.Stdin = strings.NewReader(initLine + "\n")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("the server did not fail to start (err %v)\nstdout: %.300s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout carries %q on a failed start", stdout.String())
	}
	msg := strings.TrimSpace(stderr.String())
	if !strings.Contains(msg, want) {
		t.Errorf("the message does not name %s:\n%s", want, msg)
	}
	for _, a := range advice {
		if !strings.Contains(msg, a) {
			t.Errorf("the message lacks %q:\n%s", a, msg)
		}
	}
	if strings.Count(msg, "\n") > 3 {
		t.Errorf("the message is not short:\n%s", msg)
	}
	t.Logf("exit %d: %s", ee.ExitCode(), msg)
	return msg
}

func fileSum(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noSidecars checks that SQLite left no -wal, -shm or -journal beside a
// file it refused.
func noSidecars(t *testing.T, path string) {
	t.Helper()
	for _, s := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(path + s); err == nil {
			t.Errorf("%s was created beside the refused database", filepath.Base(path+s))
		}
	}
}

// mountTmpfs mounts a small tmpfs at dir for the test, or skips when this
// machine does not let the test mount (not root, no CAP_SYS_ADMIN, a
// container without mount, not Linux).
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	if _, err := exec.LookPath("mount"); err != nil {
		t.Skip("no mount command")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

func TestStartupFailures(t *testing.T) {
	advPermission := []string{"permission denied", "writable", "chmod", "PROMETHEUS_MEMORY_DB_PATH"}
	advMoveAside := []string{"move it aside", "left untouched", "PROMETHEUS_MEMORY_DB_PATH"}
	advFull := []string{"full", "free some space"}
	advReadOnly := []string{"read-only", "writable place", "PROMETHEUS_MEMORY_DB_PATH"}

	t.Run("garbage database file", func(t *testing.T) {
		e := newEnv(t)
		os.MkdirAll(filepath.Dir(e.db), 0o700)
		garbage := make([]byte, 16<<10)
		rand.Read(garbage)
		must(t, os.WriteFile(e.db, garbage, 0o600))
		startFails(t, e, nil, e.db, advMoveAside...)
		if !bytes.Equal(fileSum(t, e.db), garbage) {
			t.Error("the garbage file was changed")
		}
		noSidecars(t, e.db)
	})

	t.Run("corrupt SQLite file", func(t *testing.T) {
		// A real database cut short after its header: it claims to be
		// SQLite, so SQLite reads further before it gives up.
		e := newEnv(t)
		good := newEnv(t)
		out, err := good.command("read").CombinedOutput()
		if err != nil {
			t.Fatalf("make a database: %v: %s", err, out)
		}
		whole := fileSum(t, good.db)
		if len(whole) < 8192 {
			t.Fatalf("database only %d bytes", len(whole))
		}
		bad := append([]byte{}, whole[:4096]...)
		junk := make([]byte, 8192)
		rand.Read(junk)
		bad = append(bad, junk...)
		os.MkdirAll(filepath.Dir(e.db), 0o700)
		must(t, os.WriteFile(e.db, bad, 0o600))
		startFails(t, e, nil, e.db, advMoveAside...)
		if !bytes.Equal(fileSum(t, e.db), bad) {
			t.Error("the corrupt file was changed")
		}
	})

	t.Run("database path is a directory", func(t *testing.T) {
		e := newEnv(t)
		must(t, os.MkdirAll(e.db, 0o700))
		must(t, os.WriteFile(filepath.Join(e.db, "keep"), []byte("x"), 0o600))
		startFails(t, e, nil, e.db, "is a directory", "must name a file")
		if b, _ := os.ReadFile(filepath.Join(e.db, "keep")); string(b) != "x" {
			t.Error("the directory's content changed")
		}
	})

	t.Run("parent is a regular file", func(t *testing.T) {
		e := newEnv(t)
		parent := filepath.Dir(e.db)
		os.MkdirAll(filepath.Dir(parent), 0o700)
		must(t, os.WriteFile(parent, []byte("not a directory"), 0o600))
		startFails(t, e, nil, parent, "not a directory", "move that file", "PROMETHEUS_MEMORY_DB_PATH")
		if b, _ := os.ReadFile(parent); string(b) != "not a directory" {
			t.Error("the file in the way was changed")
		}
		// Deeper: a/b/c under the file.
		e.db = filepath.Join(parent, "a", "b", "memory.db")
		startFails(t, e, nil, parent, "not a directory", "move that file")
	})

	t.Run("directory without permission", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores file permissions")
		}
		e := newEnv(t)
		dir := filepath.Dir(e.db)
		must(t, os.MkdirAll(dir, 0o700))
		must(t, os.Chmod(dir, 0o500))
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		startFails(t, e, nil, e.db, advPermission...)
	})

	t.Run("read-only database file", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root ignores file permissions")
		}
		e := newEnv(t)
		if out, err := e.command("read").CombinedOutput(); err != nil {
			t.Fatalf("make a database: %v: %s", err, out)
		}
		before := fileSum(t, e.db)
		must(t, os.Chmod(e.db, 0o400))
		startFails(t, e, nil, e.db, "writable", "PROMETHEUS_MEMORY_DB_PATH")
		if !bytes.Equal(fileSum(t, e.db), before) {
			t.Error("the read-only database changed")
		}
	})

	t.Run("file size limit", func(t *testing.T) {
		// RLIMIT_FSIZE stops root too: writes past it fail with EFBIG (Go
		// ignores SIGXFSZ, so the process is not killed).
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			t.Skip("no prlimit (util-linux)")
		}
		e := newEnv(t)
		startFails(t, e, []string{prlimit, "--fsize=4096", "--"}, e.db, append(advFull, "limit")...)
	})

	t.Run("read-only file system", func(t *testing.T) {
		e := newEnv(t)
		mnt := filepath.Join(t.TempDir(), "ro")
		mountTmpfs(t, mnt, "size=1m")
		// An existing database on it, then remount read-only.
		seeded := e
		seeded.db = filepath.Join(mnt, "memory.db")
		if out, err := seeded.command("read").CombinedOutput(); err != nil {
			t.Fatalf("make a database: %v: %s", err, out)
		}
		os.Remove(seeded.db + "-wal")
		os.Remove(seeded.db + "-shm")
		before := fileSum(t, seeded.db)
		if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
			t.Skipf("cannot remount read-only: %v: %s", err, out)
		}
		startFails(t, seeded, nil, seeded.db, advReadOnly...)
		if !bytes.Equal(fileSum(t, seeded.db), before) {
			t.Error("the database on the read-only file system changed")
		}
		fresh := e
		fresh.db = filepath.Join(mnt, "new.db")
		startFails(t, fresh, nil, fresh.db, advReadOnly...)
		fresh.db = filepath.Join(mnt, "sub", "memory.db")
		startFails(t, fresh, nil, filepath.Join(mnt, "sub"), advReadOnly...)
	})

	t.Run("full disk", func(t *testing.T) {
		e := newEnv(t)
		mnt := filepath.Join(t.TempDir(), "full")
		mountTmpfs(t, mnt, "size=1m")
		// Fill it, leaving a few blocks: a new database needs about 180 KiB,
		// and its write-ahead log as much again while it is made.
		f, err := os.Create(filepath.Join(mnt, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(make([]byte, 1000<<10))
		f.Close()
		e.db = filepath.Join(mnt, "memory.db")
		startFails(t, e, nil, e.db, advFull...)
		// Once there is room, the same path works: the failed start left
		// nothing that stands in the way.
		must(t, os.Remove(filepath.Join(mnt, "filler")))
		if out, err := e.command("read").CombinedOutput(); err != nil {
			t.Errorf("after freeing space: %v: %s", err, out)
		}
		db, err := sql.Open("sqlite3", "file:"+e.db)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		integrityCheck(t, db)
	})
}
