//go:build !linux

package mirror

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// Files cannot be made ahead here: writes make named temporary files.

func canMakeSpares() bool { return false }

func makeSpare(dir *os.File) (*os.File, error) { return nil, errors.ErrUnsupported }

// stampWritten leaves the mtime as the write set it (see stampFor): a sync
// reads files written within racyWindow to be sure of them.
func stampWritten(f *os.File) time.Time { return time.Time{} }

func cannotMakeSpares(err error) bool { return true }

func linkSpare(f, dir *os.File, name string) error { return errors.ErrUnsupported }

type dirID struct{}

func dirIdentity(fi fs.FileInfo) dirID { return dirID{} }
