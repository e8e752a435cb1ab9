package mirror

import (
	"errors"
	"syscall"
	"unsafe"
)

// watch tells whether anything happened in a directory since it was last
// asked, through inotify, so that a sync that would find nothing can skip
// listing and stat-ing every file.
type watch struct {
	fd int
}

const watchMask = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MODIFY | syscall.IN_ATTRIB |
	syscall.IN_CLOSE_WRITE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO |
	syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF

// newWatch watches dir, or returns nil when it cannot (no inotify, its
// limits reached): callers then scan every time.
func newWatch(dir string) *watch {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, watchMask); err != nil {
		syscall.Close(fd)
		return nil
	}
	return &watch{fd: fd}
}

// quiet drains pending events and reports whether there were none. After
// an event that ends the watch (the directory deleted or moved, the queue
// overflowed) it reports false; the caller must then close it and start a
// new one.
func (w *watch) quiet() (quiet, alive bool) {
	var buf [4096]byte
	quiet, alive = true, true
	for {
		n, err := syscall.Read(w.fd, buf[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EAGAIN) {
			return quiet, alive
		}
		if err != nil || n <= 0 {
			return false, false
		}
		quiet = false
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&(syscall.IN_Q_OVERFLOW|syscall.IN_IGNORED|syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0 {
				alive = false
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func (w *watch) close() { syscall.Close(w.fd) }
