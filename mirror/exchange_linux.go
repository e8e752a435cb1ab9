package mirror

import (
	"errors"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// exchange swaps the files at tmp (in the temporary directory) and name (in
// the memories directory) in one step, so that tmp then holds whatever name
// held at that instant, even a file an editor renamed over it a moment
// before. It reports false, with no error, where the file system cannot
// swap (the caller falls back to holding the file aside and renaming).
func exchange(r *os.Root, tmp, name string) (bool, error) {
	if strings.Contains(name, "/") || path.Dir(tmp) != tempSub {
		return false, nil
	}
	td, err := r.Open(tempSub)
	if err != nil {
		return false, err
	}
	defer td.Close()
	rd, err := r.Open(".")
	if err != nil {
		return false, err
	}
	defer rd.Close()
	err = unix.Renameat2(int(td.Fd()), path.Base(tmp), int(rd.Fd()), name, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return false, nil
	}
	if err != nil {
		return false, &os.LinkError{Op: "exchange", Old: tmp, New: name, Err: err}
	}
	return true, nil
}

// renameNoReplace renames tmp (in the temporary directory) to name (in the
// memories directory) unless name exists, where the file system can tell;
// elsewhere it renames.
func renameNoReplace(r *os.Root, tmp, name string) error {
	if strings.Contains(name, "/") || path.Dir(tmp) != tempSub {
		return r.Rename(tmp, name)
	}
	td, err := r.Open(tempSub)
	if err != nil {
		return err
	}
	defer td.Close()
	rd, err := r.Open(".")
	if err != nil {
		return err
	}
	defer rd.Close()
	err = unix.Renameat2(int(td.Fd()), path.Base(tmp), int(rd.Fd()), name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return r.Rename(tmp, name)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: name, Err: err}
	}
	return nil
}
