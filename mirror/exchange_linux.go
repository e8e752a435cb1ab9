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
	return rename2(r, "exchange", tmp, name, unix.RENAME_EXCHANGE)
}

// renameNoReplace renames tmp (in the temporary directory) to name (in the
// memories directory) unless name exists, where the file system can tell;
// elsewhere it renames.
func renameNoReplace(r *os.Root, tmp, name string) error {
	done, err := rename2(r, "rename", tmp, name, unix.RENAME_NOREPLACE)
	if err == nil && !done {
		return r.Rename(tmp, name)
	}
	return err
}

// rename2 renames tmp (in the temporary directory) to name (in the
// memories directory) with renameat2's flags. It reports false, with no
// error, where the file system does not support them.
func rename2(r *os.Root, op, tmp, name string, flags uint) (bool, error) {
	if strings.Contains(name, "/") || path.Dir(tmp) != tempSub {
		return false, nil
	}
	td, err := openIn(r, tempSub)
	if err != nil {
		return false, err
	}
	defer td.Close()
	rd, err := openIn(r, ".")
	if err != nil {
		return false, err
	}
	defer rd.Close()
	err = unix.Renameat2(int(td.Fd()), path.Base(tmp), int(rd.Fd()), name, flags)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return false, nil
	}
	if err != nil {
		return false, &os.LinkError{Op: op, Old: tmp, New: name, Err: err}
	}
	return true, nil
}
