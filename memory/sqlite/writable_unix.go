//go:build unix

package sqlite

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// writable reports, without opening it, whether this process may write
// the existing file at path: SQLite opens one it may not read-only, and
// the first write would fail instead of Open.
func writable(path string) error {
	if err := unix.Access(path, unix.W_OK); err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return nil
}
