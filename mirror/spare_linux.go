package mirror

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// canMakeSpares reports whether files made ahead can be linked in:
// linkSpare names them through /proc.
func canMakeSpares() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}

// makeSpare makes an unnamed file in dir, mode 0644 less the umask, open
// for writing and reading (a write reads it back once it is linked in).
func makeSpare(dir *os.File) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, &os.PathError{Op: "make a file ahead", Path: dir.Name(), Err: err}
	}
	return os.NewFile(uintptr(fd), "(made ahead)"), nil
}

// cannotMakeSpares reports whether makeSpare's err says that the system
// or the file system cannot make them at all, not that this one could
// not be made now (no space, no inode, a directory made read-only).
func cannotMakeSpares(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOSYS) || errors.Is(err, errors.ErrUnsupported)
}

// linkSpare names f, made by makeSpare, name in dir. It never replaces a
// file: an existing name fails with EEXIST. It links the descriptor
// itself (AT_EMPTY_PATH), which spares the kernel the walk through
// /proc/self/fd; a kernel that refuses that (before Linux 6.10 it takes
// CAP_DAC_READ_SEARCH) is asked through /proc, from then on first.
func linkSpare(f, dir *os.File, name string) error {
	fd, dfd := int(f.Fd()), int(dir.Fd())
	viaProc := func() error {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
	}
	var err error
	if emptyPathRefused.Load() {
		err = viaProc()
	} else if err = linkEmptyPath(fd, dfd, name); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
		// Refused, or the directory is gone: /proc tells which.
		if err = viaProc(); err == nil {
			emptyPathRefused.Store(true)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "link", Old: "(made ahead)", New: name, Err: err}
	}
	return nil
}

// emptyPathRefused is set once the kernel has refused to link a
// descriptor by itself where /proc could.
var emptyPathRefused atomic.Bool

// linkEmptyPath links the file open as fd under name in the directory dfd;
// tests stand in an older kernel's refusal.
var linkEmptyPath = func(fd, dfd int, name string) error {
	return unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH)
}

// stampWritten sets f's mtime to the stamp of a write now (see stampFor),
// with utimensat on the descriptor (futimens): f may have no name yet. It
// returns the stamp, or the zero time when it could not set one: the file
// then keeps its write's mtime.
func stampWritten(f *os.File) time.Time {
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}
	}
	stamp := stampFor(time.Now(), inode(fi))
	c, err := f.SyscallConn()
	if err != nil {
		return time.Time{}
	}
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(stamp.UnixNano())}
	var errno syscall.Errno
	if err := c.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	}); err != nil || errno != 0 {
		return time.Time{}
	}
	return stamp
}

// dirID is what decides the owner, group and mode of a file made in a
// directory, and which directory it is.
type dirID struct {
	dev, ino uint64
	uid, gid uint32
	mode     fs.FileMode
}

func dirIdentity(fi fs.FileInfo) dirID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino, uid: st.Uid, gid: st.Gid, mode: fi.Mode()}
}
