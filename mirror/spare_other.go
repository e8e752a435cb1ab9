//go:build !linux

package mirror

import (
	"errors"
	"os"
)

// Files cannot be made ahead here: writes make named temporary files.

func canMakeSpares() bool { return false }

func makeSpare(dir *os.File) (*os.File, error) { return nil, errors.ErrUnsupported }

func sparesWork(err error) bool { return false }

func linkSpare(f, dir *os.File, name string) error { return errors.ErrUnsupported }
