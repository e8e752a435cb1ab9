package mirror

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// canMakeSpares reports whether files made ahead can be linked in:
// linkSpare names them through /proc.
func canMakeSpares() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}

// makeSpare makes an unnamed file in dir's file system, mode 0644 less the
// umask, open for writing.
func makeSpare(dir *os.File) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, &os.PathError{Op: "make a file ahead", Path: dir.Name(), Err: err}
	}
	return os.NewFile(uintptr(fd), "(made ahead)"), nil
}

// sparesWork reports whether makeSpare's err says only that this one
// could not be made now (no space, no inode, too many files open), not
// that the system cannot make them at all.
func sparesWork(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || errors.Is(err, unix.EMFILE) ||
		errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EINTR) ||
		errors.Is(err, unix.ENOENT)
}

// linkSpare names f, made by makeSpare, name in dir. It never replaces a
// file: an existing name fails with EEXIST.
func linkSpare(f, dir *os.File, name string) error {
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), int(dir.Fd()), name, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		return &os.LinkError{Op: "link", Old: "(made ahead)", New: name, Err: err}
	}
	return nil
}
