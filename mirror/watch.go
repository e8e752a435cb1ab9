package mirror

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// A Dir follows its directory with fsnotify, so that a sync looks only at
// the files something happened to since the one before, rather than
// listing the directory and statting every file. The events only say
// which files to look at; what a file holds is still decided by looking
// at it, so an event too many costs a stat and no event is trusted with
// data.
//
// Events arrive on their own goroutine, a moment after the change. So
// that a sync sees every change made before it started (a person saves,
// then asks the agent), it first touches a cookie file and waits for that
// file's event: the events of one watcher come in order, so every earlier
// change has been noted by then. Watchman syncs its queries the same way.
// The cookie is a file of the Dir's own in the temporary directory, which
// git ignores, watched by the same watcher; it is made when the watcher
// starts, and each sync only sets its times, far cheaper than creating a
// file. (Where a platform does not keep the order across
// two directories, an event late past its cookie waits for the next sync
// or the next full scan; data is never at stake, since a write refuses to
// overwrite a file that is not what the store last saw.)
//
// Whatever the watcher cannot vouch for is a full scan, as without one:
// the first sync, a sync after the watcher lost track (a queue overflow,
// an error, the directory itself removed, moved or replaced), and a sync
// when no watcher could be started (inotify limits, a file system that
// has none) or the cookie did not come back. A full scan also runs every
// rescanEvery, so that a change made where no event reaches this process
// (a network or VM-shared file system edited from the other side) is
// seen within that time.
const (
	rescanEvery = 2 * time.Second
	cookieWait  = time.Second // then the watcher is given up, for watchRetry
	watchRetry  = time.Minute
	maxPending  = 10000 // more changed files than this: a full scan is as cheap
)

// watcher is the directory's fsnotify watcher while it has one.
type watcher struct {
	w    *fsnotify.Watcher
	dir  fs.FileInfo   // the directory watched: one put in its place is not
	done chan struct{} // closed when follow returns
}

// watchState is what the watcher's goroutine notes for the next sync,
// under Dir.mu.
type watchState struct {
	pending map[string]bool // stems of the *.md files with events, or a write of ours
	lost    bool            // anything may have changed
	cookie  string          // the cookie's name in the temporary directory
	waiting chan struct{}   // closed at the cookie's next change of times
}

// changes says what this sync must look at: the stems of the files with
// events since the last sync, or all of them. It starts (or restarts) the
// watcher when there is none, and waits for the cookie. d.syncMu is held;
// r is the open directory.
func (d *Dir) changes(r *os.Root, now time.Time) (stems []string, all bool) {
	all = d.scannedAt.IsZero() || now.Sub(d.scannedAt) >= rescanEvery || d.exportDue(now)
	if d.watcher != nil && !d.following() {
		d.unwatch()
	}
	if d.watcher == nil {
		all = true
		if !d.noWatch && !d.closed && !now.Before(d.watchAgain) {
			if err := d.watch(r); err != nil {
				d.logger().Debug("memory directory not watched; every sync scans it", "err", err)
				d.watchAgain = now.Add(watchRetry)
			}
		}
	}
	if !all {
		if err := d.cookie(r); err != nil {
			d.logger().Debug("memory directory watcher stopped", "err", err)
			d.unwatch()
			if errors.Is(err, errNoAnswer) {
				d.watchAgain = now.Add(watchRetry)
			}
			all = true
		}
	}
	d.mu.Lock()
	pending, lost := d.ws.pending, d.ws.lost
	d.ws.pending, d.ws.lost = map[string]bool{}, false
	problems := len(d.problems)
	d.mu.Unlock()
	if all || lost {
		return nil, true
	}
	stems = make([]string, 0, len(pending)+problems)
	for stem := range pending {
		stems = append(stems, stem)
	}
	d.mu.Lock()
	for stem := range d.problems {
		if !pending[stem] {
			stems = append(stems, stem) // looked at again, as a full scan does, to report it
		}
	}
	d.mu.Unlock()
	slices.Sort(stems) // the order a full scan has
	return stems, false
}

// watch starts a watcher on the directory and its temporary directory,
// making that if needed, and makes the cookie.
func (d *Dir) watch(r *os.Root) error {
	fi, err := os.Stat(d.path) // before Add: a directory replaced in between is caught next time
	if err != nil {
		return err
	}
	if err := makeTempSub(r); err != nil {
		return err
	}
	// A temporary file's name, so that a sync sweeps one a crash left.
	cookie := cookiePrefix + randomHex() + ".tmp"
	if err := r.WriteFile(tempSub+"/"+cookie, nil, 0o600); err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		for _, p := range []string{d.path, filepath.Join(d.path, tempSub)} {
			if err = w.Add(p); err != nil {
				w.Close()
				break
			}
		}
	}
	if err != nil {
		r.Remove(tempSub + "/" + cookie)
		return err
	}
	d.mu.Lock()
	d.ws = watchState{pending: map[string]bool{}, cookie: cookie}
	d.mu.Unlock()
	d.watcher = &watcher{w: w, dir: fi, done: make(chan struct{})}
	go d.follow(d.watcher)
	return nil
}

// following reports whether the watcher still follows the directory at
// d.path: no other directory took the place of the one it watches (it
// follows that one, wherever it was moved).
func (d *Dir) following() bool {
	fi, err := os.Stat(d.path)
	return err == nil && os.SameFile(fi, d.watcher.dir)
}

// unwatch stops the watcher, if any, waits for its goroutine and removes
// the cookie.
func (d *Dir) unwatch() {
	if d.watcher == nil {
		return
	}
	d.watcher.w.Close()
	<-d.watcher.done
	d.watcher = nil
	if r, err := d.openRoot(false); err == nil {
		r.Remove(tempSub + "/" + d.ws.cookie)
		r.Close()
	}
}

// follow notes the watcher's events until it is closed.
func (d *Dir) follow(w *watcher) {
	defer close(w.done)
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			d.event(ev)
		case _, ok := <-w.w.Errors:
			if !ok {
				return
			}
			// fsnotify.ErrEventOverflow or a read error: events were lost.
			d.mu.Lock()
			d.ws.lost = true
			d.mu.Unlock()
		}
	}
}

func (d *Dir) event(ev fsnotify.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ev.Name == d.path {
		d.ws.lost = true // the directory itself was removed, moved or changed mode
		return
	}
	dir, name := filepath.Split(ev.Name)
	if name == d.ws.cookie {
		if ev.Has(fsnotify.Chmod) && d.ws.waiting != nil {
			close(d.ws.waiting)
			d.ws.waiting = nil
		}
		return
	}
	if filepath.Clean(dir) == d.path {
		d.noteLocked(name) // not one in the temporary directory
	}
}

// noteLocked marks the file name for the next sync to look at. Names a
// sync ignores (not *.md, or hidden: temporary files, cookies, .tmp) are
// not noted. d.mu is held.
func (d *Dir) noteLocked(name string) {
	stem, ok := strings.CutSuffix(name, ".md")
	if !ok || stem == "" || strings.HasPrefix(name, ".") || d.ws.pending == nil {
		return
	}
	if len(d.ws.pending) >= maxPending {
		d.ws.lost = true
		return
	}
	d.ws.pending[stem] = true
}

// note marks key's file for the next sync to look at, after a write or a
// removal of ours: its events may come after that sync's cookie, and a
// write refused because the file changed is retried after a sync that
// must look at it.
func (d *Dir) note(key string) {
	if _, err := fileName(key); err != nil {
		return
	}
	d.mu.Lock()
	d.noteLocked(key + ".md")
	d.mu.Unlock()
}

// cookie touches the cookie and waits for its event: see above.
func (d *Dir) cookie(r *os.Root) error {
	ch := make(chan struct{})
	d.mu.Lock()
	d.ws.waiting = ch
	name := d.ws.cookie
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.ws.waiting = nil
		d.mu.Unlock()
	}()
	// Its mtime kept fresh, so that no sync sweeps it as a crash's.
	now := time.Now()
	if err := r.Chtimes(tempSub+"/"+name, now, now); err != nil {
		return err
	}
	t := time.NewTimer(cookieWait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-d.watcher.done:
		return errors.New("the watcher stopped")
	case <-t.C:
		return errNoAnswer
	}
}

const cookiePrefix = ".sync-cookie.md."

var errNoAnswer = errors.New("no event came for a file created in the watched directory")
