package mirror

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"
)

// Files made ahead. Creating a file is most of what a fact's write costs
// the kernel, and on some file systems far more than the rest of the
// write: ext4 without a journal steps over every inode freed in the last
// minute (six while their table block is dirty) before it takes one. So
// Dir makes the files its writes need ahead of time, in the background:
// unnamed files (O_TMPFILE) in the temporary directory, where named
// temporary files are made too, so that they get the same group and mode.
// A write fills one and links it in under a name. An unnamed file takes
// no directory's lock to make, so making them never holds up a write, and
// one a killed process leaves is freed by the kernel with nothing left on
// disk. Where the system cannot make or link them, writes make named
// temporary files as before.
//
// A file made ahead has the mode the process's umask gave it when it was
// made (the server never changes its umask), and the group of the
// temporary directory as it was then: one whose owner, group or mode has
// changed since, or that is another directory now, has its files made
// ahead dropped. They are let go too when writes stop for sparesIdle, or
// a write finds no directory, so that they never keep a file system from
// being unmounted for long.
const (
	sparesMade = 8 // a refill makes up to this many
	sparesLow  = 3 // and starts when a write leaves fewer
)

// sparesIdle is how long files made ahead are kept after the last write
// that took one (tests set spares.keep instead).
const sparesIdle = 2 * time.Second

type spares struct {
	mu     sync.Mutex
	files  []*os.File
	dir    dirID       // the temporary directory they were made in, as it was then
	making bool        // a refill is under way
	off    bool        // the system cannot make or link them
	closed bool        // the Dir was closed: no more are made
	used   time.Time   // when a write last took one
	idle   *time.Timer // lets them go after sparesIdle without a write
	keep   time.Duration
}

// idleFor is how long they are kept without a write; s.mu is held.
func (s *spares) idleFor() time.Duration {
	if s.keep > 0 {
		return s.keep
	}
	return sparesIdle
}

// MakeFilesAhead has d make the files its writes need ahead of time,
// running the work in its own goroutine through run (nil: as it is; the
// server lends it a processor of its own, see the memory package's
// Options.Blocking). It is for a process that writes for a while, a
// server: a command that writes once and exits would make files it never
// uses. Without it, writes make named temporary files.
func (d *Dir) MakeFilesAhead(run func(work func())) {
	if run == nil {
		run = func(work func()) { work() }
	}
	d.mu.Lock()
	d.blocking = run
	d.mu.Unlock()
}

// spareWith returns a file made ahead for r's temporary directory holding
// data, with mode exactly perm when keepPerm (else the mode it was made
// with: 0644 less the umask), and its stamp (see stampWritten), or nil
// when there is none; a refill starts when few are left. The caller links
// it in (linkIn) and closes it.
func (d *Dir) spareWith(r *os.Root, data []byte, perm fs.FileMode, keepPerm bool) (*os.File, time.Time) {
	d.mu.Lock()
	run := d.blocking
	d.mu.Unlock()
	if run == nil {
		return nil, time.Time{} // not asked to make them
	}
	var now dirID
	if fi, err := r.Lstat(tempSub); err == nil && fi.IsDir() {
		now = dirIdentity(fi)
	}
	s := &d.spares
	s.mu.Lock()
	var f *os.File
	if len(s.files) > 0 && (now == dirID{} || now != s.dir) {
		d.dropLocked()
	}
	if n := len(s.files); n > 0 {
		f, s.files = s.files[n-1], s.files[:n-1]
	}
	if s.off || s.closed {
		s.mu.Unlock()
		return d.fill(f, data, perm, keepPerm)
	}
	s.used = time.Now()
	if s.idle == nil {
		s.idle = time.AfterFunc(s.idleFor(), d.idleCheck)
	}
	if len(s.files) < sparesLow && !s.making {
		s.making = true
		go run(d.refill)
	}
	s.mu.Unlock()
	return d.fill(f, data, perm, keepPerm)
}

// fill writes data into f, a file made ahead, sets its mode to perm when
// keepPerm, and stamps it; it returns nil, having closed f, if that fails.
func (d *Dir) fill(f *os.File, data []byte, perm fs.FileMode, keepPerm bool) (*os.File, time.Time) {
	if f == nil {
		return nil, time.Time{}
	}
	_, err := f.Write(data)
	if err == nil && keepPerm {
		err = f.Chmod(perm)
	}
	if err != nil {
		f.Close()
		return nil, time.Time{}
	}
	return f, stampWritten(f)
}

// idleCheck lets the files made ahead go once no write has taken one for
// sparesIdle.
func (d *Dir) idleCheck() {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	if left := s.idleFor() - time.Since(s.used); left > 0 && !s.closed {
		s.idle.Reset(left)
		return
	}
	s.idle = nil
	d.dropLocked()
	d.letGoHeld()
}

// refill makes files ahead until there are sparesMade, in the temporary
// directory as it is now; it makes none while there is none.
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
	// Writes make the temporary directory: made here, in the
	// background, it could keep a person's rm -r of the directory from
	// finishing.
	dir, err := openIn(r, tempSub)
	if err != nil {
		return
	}
	defer dir.Close()
	fi, err := dir.Stat()
	if err != nil {
		return
	}
	id := dirIdentity(fi)
	for {
		s.mu.Lock()
		if id != s.dir {
			d.dropLocked()
			s.dir = id
		}
		stop := s.closed || s.idle == nil || len(s.files) >= sparesMade
		s.mu.Unlock()
		if stop {
			return
		}
		f, err := makeSpare(dir)
		s.mu.Lock()
		switch {
		case err != nil:
			// Out of inodes or space, or a directory that refuses
			// them now: writes make their own files, and say why if
			// they cannot either; the next write tries again.
			s.off = s.off || cannotMakeSpares(err)
		case s.closed || s.idle == nil || id != s.dir:
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

// dropSpares closes the files made ahead; with closing, no more are made.
func (d *Dir) dropSpares(closing bool) {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	d.dropLocked()
	d.letGoHeld()
	if closing {
		s.closed = true
		if s.idle != nil {
			s.idle.Stop()
			s.idle = nil
		}
	}
}

// dropLocked closes the files made ahead; d.spares.mu is held.
func (d *Dir) dropLocked() {
	s := &d.spares
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
}

// spareReady reports whether a file made ahead is there for the next
// write, or none will be.
func (d *Dir) spareReady() bool {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files) > 0 || s.off || s.closed
}

// hasSpare reports whether a file made ahead is there to take.
func (d *Dir) hasSpare() bool {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.files) > 0
}

// linkIn gives f, a file made ahead, the name name in sub, a directory
// of r ("." for r's own). It fails with an error matching fs.ErrExist if
// something has that name already: nothing is ever replaced.
func (d *Dir) linkIn(r *os.Root, f *os.File, sub, name string) error {
	dir := d.heldFile(r)
	if dir == nil || sub != "." {
		var err error
		if dir, err = openIn(r, sub); err != nil {
			return err
		}
		defer dir.Close()
	}
	err := linkSpare(f, dir, name)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// The directory went, became another file system (a mount) or
		// refuses links: the rest would fail the same way.
		d.dropSpares(false)
	}
	return err
}

// noLinks turns files made ahead off for good: the file system cannot
// link files (a name could be given by a rename and not by a link).
func (d *Dir) noLinks() {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	d.dropLocked()
	s.off = true
}
