package mirror

import (
	"bytes"
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

// changes drains pending events and returns the names of the files they
// concern, each once. known is false when that cannot be told: the queue
// overflowed, the directory itself was deleted or moved, or more names came
// than are worth looking at one by one. alive is false when the watch has
// ended; the caller must then close it and start a new one.
func (w *watch) changes() (names []string, known, alive bool) {
	var buf [4096]byte
	known, alive = true, true
	seen := map[string]bool{}
	for {
		n, err := syscall.Read(w.fd, buf[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EAGAIN) {
			return names, known, alive
		}
		if err != nil || n <= 0 {
			return nil, false, false
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&(syscall.IN_Q_OVERFLOW|syscall.IN_IGNORED|syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0 {
				known, alive = false, false
			}
			start := off + syscall.SizeofInotifyEvent
			end := min(start+int(ev.Len), n)
			if name := string(bytes.TrimRight(buf[start:end], "\x00")); name != "" && known && !seen[name] {
				seen[name] = true
				names = append(names, name)
				if len(names) > maxWatchNames {
					known = false
				}
			}
			off = start + int(ev.Len)
		}
		if !known {
			names = nil
		}
	}
}

// maxWatchNames bounds the names changes collects.
const maxWatchNames = 256

func (w *watch) close() { syscall.Close(w.fd) }
