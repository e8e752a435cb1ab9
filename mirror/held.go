package mirror

import (
	"io/fs"
	"os"
	"time"
)

// The memories directory held open between writes. Each write used to
// open it after walking the path to it, and close it after, and open it
// a second time to link a file made ahead into it. A Dir that makes files
// ahead (a server's) holds it open from one write to the next instead.
// Each write still walks the path (checkDirs: every step a directory, no
// symlink on the way) and takes the held directory only if the walk ends
// at that very one: a directory held open keeps its inode, so no other
// can have its device and inode number meanwhile. It is let go with the
// files made ahead (when a write finds no directory, after sparesIdle
// without a write, at Close) so that it does not keep a file system from
// being unmounted for long.
type heldDir struct {
	root  *os.Root
	dir   *os.File    // the same directory, to link files made ahead into
	fi    fs.FileInfo // its stat when it was opened
	users int         // under Dir.mu: the Dir's hold and each write's
}

// rootFor returns the memories directory for a write, as openRoot does,
// and what the write calls when done with it. A sync (keep false) takes
// the held directory but never holds one: only a write starts the timer
// that lets it go.
func (d *Dir) rootFor(create, keep bool) (*os.Root, func(), error) {
	holding := d.holding()
	if holding && (keep || d.hasHeld()) {
		fi, whole, err := d.walk()
		if err != nil {
			return nil, nil, err
		}
		if whole {
			if h := d.takeHeld(fi); h != nil {
				return h.root, func() { d.release(h) }, nil
			}
		}
	}
	r, err := d.openRoot(create)
	if err != nil {
		return nil, nil, err
	}
	if holding && keep {
		if h := d.hold(r); h != nil {
			return h.root, func() { d.release(h) }, nil
		}
	}
	return r, func() { r.Close() }, nil
}

// holding reports whether d holds its directory open between writes:
// while it makes files ahead, whose timer lets both go.
func (d *Dir) holding() bool {
	d.mu.Lock()
	blocking := d.blocking != nil
	d.mu.Unlock()
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	return blocking && !s.closed && !s.off
}

// takeHeld returns the held directory, counted in use, if it is the one
// whose stat is fi; a held one that is not is let go.
func (d *Dir) takeHeld(fi fs.FileInfo) *heldDir {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.held
	if h == nil {
		return nil
	}
	if !os.SameFile(h.fi, fi) {
		d.held = nil
		d.releaseLocked(h)
		return nil
	}
	h.users++
	return h
}

// hold holds r, just opened, from now on, and returns it counted in use;
// nil if it cannot (r is left as it was), or if d stopped making files
// ahead meanwhile (Close): under the spares' lock, as letting go is, so
// that no directory is held after that. Holding one arms the timer that
// lets it go, which a write that takes no file made ahead (one that
// changes nothing, a conflict) would not.
func (d *Dir) hold(r *os.Root) *heldDir {
	dir, err := openIn(r, ".")
	if err != nil {
		return nil
	}
	fi, err := dir.Stat()
	if err != nil {
		dir.Close()
		return nil
	}
	h := &heldDir{root: r, dir: dir, fi: fi, users: 2}
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.off {
		dir.Close()
		return nil
	}
	if s.idle == nil {
		s.used = time.Now()
		s.idle = time.AfterFunc(s.idleFor(), d.idleCheck)
	}
	d.mu.Lock()
	old := d.held
	d.held = h
	if old != nil {
		d.releaseLocked(old)
	}
	d.mu.Unlock()
	return h
}

// hasHeld reports whether a directory is held (for a sync, which walks
// to it only then: openRoot walks too).
func (d *Dir) hasHeld() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held != nil
}

// heldFile returns the directory r is, open as a file, if r is the held
// directory: for a write that has it in use, so it stays open.
func (d *Dir) heldFile(r *os.Root) *os.File {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil && d.held.root == r {
		return d.held.dir
	}
	return nil
}

// release is a write done with h.
func (d *Dir) release(h *heldDir) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releaseLocked(h)
}

func (d *Dir) releaseLocked(h *heldDir) {
	if h.users--; h.users == 0 {
		h.dir.Close()
		h.root.Close()
	}
}

// letGoHeld lets the held directory go; a write still using it closes it
// when done.
func (d *Dir) letGoHeld() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		d.releaseLocked(d.held)
		d.held = nil
	}
}
