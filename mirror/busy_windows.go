package mirror

import (
	"errors"

	"golang.org/x/sys/windows"
)

// busy reports whether err is Windows refusing a rename or removal because
// another process holds the file open without sharing its deletion: an
// editor, an indexer or a virus scanner, which lets go within moments.
func busy(err error) bool {
	return errors.Is(err, windows.ERROR_SHARING_VIOLATION) ||
		errors.Is(err, windows.ERROR_LOCK_VIOLATION) ||
		errors.Is(err, windows.ERROR_ACCESS_DENIED)
}
