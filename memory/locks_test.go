//go:build linux

package memory

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSecondOpenKeepsSQLiteLocks checks that opening a second Store on a
// database this process already has open does not drop the first one's
// SQLite locks on the database file (by opening and closing the file to
// create it).
func TestSecondOpenKeepsSQLiteLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	a := openPath(t, path)
	var n int
	if err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM records`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if !lockHeld(t, path, 0x40000002, 510) {
		t.Fatal("no shared lock on the database file: the test cannot see SQLite's locks")
	}
	b, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if !lockHeld(t, path, 0x40000002, 510) {
		t.Fatal("the first Store's lock on the database file is gone after a second Open")
	}
}

// lockHeld reports whether this process holds a POSIX lock on n bytes of
// file from start. Asking with an open file description's lock
// (F_OFD_GETLK) sees the process's own POSIX locks as conflicts. The
// descriptor stays open until the test ends: closing it would drop them.
// SQLite holds a read lock on the -shm file's dead-man-switch byte (128)
// and on the database file's shared range (510 bytes from 2 past its lock
// byte at 1 GiB) while a connection is open.
func lockHeld(t *testing.T, file string, start, n int64) bool {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	const ofdGetLK = 36
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: start, Len: n}
	if err := syscall.FcntlFlock(f.Fd(), ofdGetLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != syscall.F_UNLCK
}
