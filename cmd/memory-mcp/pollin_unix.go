//go:build unix && !aix

package main

import (
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pollable returns a reader of in that waits for input in the runtime's
// poller, and what to call when reading is over; where it cannot, in
// itself. A blocking read keeps its processor for as long as it waits,
// and the stdio server runs on one (see oneProcessor): whatever the line
// just read readied (the SDK's handling of a ping or a tools/list, the
// next reader while a tool call runs) waited for the runtime's monitor to
// take the processor back from the read, two of its rounds, 0.1-0.2 ms
// here. A read that waits in the poller leaves it at once.
//
// A pipe (what most clients give) is opened again through /proc, on Linux:
// a description of the server's own, so that the non-blocking mode set on
// it changes nothing for whoever shares the one it was given. A socket
// (what Node's child processes get) cannot be opened again: its
// description is put in non-blocking mode and back when reading ends. A
// terminal, a file or anything else is read as it is, and so is a socket
// that is also out or stderr: the non-blocking mode would be theirs too,
// and a write to a full socket would fail instead of waiting.
func pollable(in io.Reader, out io.Writer) (io.Reader, func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	fi, err := f.Stat()
	if err != nil {
		return in, func() {}
	}
	// The descriptor, without f.Fd, which would put a pollable f in
	// blocking mode for good.
	fd, flags := -1, 0
	if c, err := f.SyscallConn(); err == nil {
		c.Control(func(d uintptr) {
			if fl, err := unix.FcntlInt(d, unix.F_GETFL, 0); err == nil {
				fd, flags = int(d), fl
			}
		})
	}
	if fd < 0 || flags&unix.O_NONBLOCK != 0 {
		return in, func() {} // polled already, or not to be touched
	}
	switch fi.Mode().Type() {
	case fs.ModeNamedPipe:
		if p := reopenPipe(fd, fi); p != nil {
			return p, func() { p.Close() }
		}
	case fs.ModeSocket:
		if writesTo(fi, out) || writesTo(fi, os.Stderr) {
			break
		}
		if s, release := nonBlockingSocket(fd, f.Name()); s != nil {
			return s, release
		}
	}
	return in, func() {}
}

// writesTo reports whether w is the file fi describes.
func writesTo(fi fs.FileInfo, w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	wi, err := f.Stat()
	return err == nil && os.SameFile(fi, wi)
}

// reopenPipe opens the pipe open as fd, whose information is fi, again,
// read-only and non-blocking, or returns nil.
func reopenPipe(fd int, fi fs.FileInfo) *os.File {
	if runtime.GOOS != "linux" {
		return nil // /dev/fd elsewhere duplicates the descriptor, description and all
	}
	// O_NONBLOCK also keeps the open from waiting for a writer.
	p, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	if pi, err := p.Stat(); err != nil || !os.SameFile(fi, pi) {
		p.Close()
		return nil
	}
	return p
}

// nonBlockingSocket returns a pollable duplicate, named name, of the
// socket open as fd, a blocking one: it puts the socket's description in
// non-blocking mode, and returns what puts it back; or nil.
func nonBlockingSocket(fd int, name string) (*os.File, func()) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, nil
	}
	s := os.NewFile(uintptr(dup), name) // non-blocking: pollable
	return s, func() {
		// Closed first: a read still waiting in the poller ends, where
		// one started after the mode went back would wait in the kernel
		// and keep the close waiting with it. Then the description,
		// shared with fd and with whoever else was given it, is left as
		// it came (a server killed before this leaves it non-blocking).
		s.Close()
		unix.SetNonblock(fd, false)
	}
}
