package mirror

import (
	"io/fs"
	"os"
	"sync"
)

// Files made ahead. Creating a file is most of what a fact's write costs
// the kernel, and on some file systems (ext4 without a journal steps over
// every inode freed in the last hours before it takes one) far more than
// the rest of the write. So Dir makes the files its writes need ahead of
// time, in the background: unnamed files in the memories directory's file
// system (O_TMPFILE), which a write fills and then links in under a name.
// An unnamed file takes no directory's lock to make, so making them never
// holds up a write, and one a killed process leaves is freed by the kernel
// with nothing left on disk. Where the system cannot make them, writes
// make named temporary files as before.
const (
	sparesMade = 8 // a refill makes up to this many
	sparesLow  = 3 // and starts when a write leaves fewer
)

type spares struct {
	mu     sync.Mutex
	files  []*os.File
	making bool // a refill is under way
	off    bool // the system cannot make or link them
	closed bool // the Dir was closed: no more are made
}

// SetBlocking sets how Dir runs work that blocks in the kernel for a
// while, in its own goroutine: making files ahead. The default runs it as
// it is; the server lends it a processor of its own (see the memory
// package's Options.Blocking).
func (d *Dir) SetBlocking(run func(work func())) {
	d.mu.Lock()
	d.blocking = run
	d.mu.Unlock()
}

// spareWith returns a file made ahead holding data, with mode exactly
// perm when keepPerm (else the mode it was made with: 0644 less the
// umask), or nil when there is none; a refill starts when few are left.
// The caller links it in (linkIn) and closes it.
func (d *Dir) spareWith(data []byte, perm fs.FileMode, keepPerm bool) *os.File {
	d.mu.Lock()
	run := d.blocking
	d.mu.Unlock()
	if run == nil {
		run = func(work func()) { work() }
	}
	s := &d.spares
	s.mu.Lock()
	var f *os.File
	if n := len(s.files); n > 0 {
		f, s.files = s.files[n-1], s.files[:n-1]
	}
	if len(s.files) < sparesLow && !s.making && !s.off && !s.closed {
		s.making = true
		go run(d.refill)
	}
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	_, err := f.Write(data)
	if err == nil && keepPerm {
		err = f.Chmod(perm)
	}
	if err != nil {
		f.Close()
		return nil
	}
	return f
}

// refill makes files ahead until there are sparesMade, in the memories
// directory as it is now; it makes none while the directory does not
// exist.
func (d *Dir) refill() {
	s := &d.spares
	defer func() {
		s.mu.Lock()
		s.making = false
		s.mu.Unlock()
	}()
	if !canMakeSpares() {
		s.mu.Lock()
		s.off = true
		s.mu.Unlock()
		return
	}
	r, err := d.openRoot(false)
	if err != nil {
		return
	}
	defer r.Close()
	dir, err := r.Open(".")
	if err != nil {
		return
	}
	defer dir.Close()
	for {
		s.mu.Lock()
		stop := s.closed || len(s.files) >= sparesMade
		s.mu.Unlock()
		if stop {
			return
		}
		f, err := makeSpare(dir)
		s.mu.Lock()
		switch {
		case err != nil:
			// Out of inodes or space, or a system that cannot make
			// them: writes make their own files, and say why if
			// they cannot either.
			s.off = s.off || !sparesWork(err)
		case s.closed:
			f.Close()
		default:
			s.files = append(s.files, f)
		}
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// spareReady reports whether a file made ahead is there for the next
// write, or none will be.
func (d *Dir) spareReady() bool {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files) > 0 || s.off || s.closed
}

// dropSpares closes the files made ahead; with closing, no more are made.
func (d *Dir) dropSpares(closing bool) {
	s := &d.spares
	s.mu.Lock()
	files := s.files
	s.files = nil
	s.closed = s.closed || closing
	s.mu.Unlock()
	for _, f := range files {
		f.Close()
	}
}

// linkIn gives f, a file made ahead, the name name in sub, a directory
// of r ("." for r's own). It fails with an error matching fs.ErrExist if
// something has that name already: nothing is ever replaced.
func (d *Dir) linkIn(r *os.Root, f *os.File, sub, name string) error {
	dir, err := r.Open(sub)
	if err != nil {
		return err
	}
	defer dir.Close()
	err = linkSpare(f, dir, name)
	if err != nil && !os.IsExist(err) && !os.IsNotExist(err) {
		// Another file system (the directory replaced by a mount), or
		// one that cannot link them: the rest would fail the same way.
		d.dropSpares(false)
	}
	return err
}
