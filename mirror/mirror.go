// Package mirror keeps a workspace's project facts and procedures as
// markdown files under <root>/.prometheus/memories, one <key>.md each, so
// engineers can read, review and edit them in pull requests. The files are
// canonical: Sync imports what changed on disk before the server reads or
// writes, and the store writes through Dir whenever a mirrored record
// changes.
//
// A file is YAML front matter between "---" lines — id, type, description,
// confidence, tags, created, updated, in that order, then metadata when the
// record has any — a blank line and the body:
//
//	---
//	id: "01JNB4Z8Q0M7V3K2D5T6R9WXYA"
//	type: semantic
//	description: "Tests run with make test"
//	confidence: 0.8
//	tags: ["testing"]
//	created: 2025-02-10T14:30:00Z
//	updated: 2025-02-11T09:00:00Z
//	---
//
//	Run `make test`, not `go test`.
//
// Encode writes that YAML itself, strings double-quoted, so a record always
// gives the same bytes. Volatile fields never reach a file. A hand-written
// file may leave out any field, or the front matter altogether.
//
// It owns the file format (Encode, Decode) and every file operation on the
// directory. It imports memory and scope, plus frontmatter, yaml.v2 and
// goldmark for parsing; nothing imports it but the server.
package mirror

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// relDir is where the files live, relative to the workspace root.
const relDir = ".prometheus/memories"

// Dir is one workspace's memories directory. It implements memory.Mirror.
// It is safe for concurrent use; Syncs of one Dir run one at a time.
type Dir struct {
	root     string // the workspace root as given, clean and absolute
	realRoot string // root with symlinks resolved
	path     string // root/.prometheus/memories

	syncMu sync.Mutex // one Sync at a time: a second one would redo the same work

	// The mirror state as last read, under syncMu. Reading it is half the
	// cost of a sync that finds nothing to do; the store's mirror version
	// says when it must be read again.
	state        map[string]memory.FileState
	stateProject scope.Identity
	stateVersion int64

	// Under syncMu too: a watch on the directory, and whether the last
	// full sync left nothing to retry. While both hold and the mirror
	// version stands still, a sync has nothing to do.
	watch        *watch
	watchCleanup runtime.Cleanup
	watched      fs.FileInfo // the directory as the watch started on it
	clean        bool
	missing      bool // the last full sync found no memories directory
	lastProblems []Problem
	mustRead     map[string]bool // stems the next full sync reads whatever their size and mtime
	quickSyncs   int             // syncs skipped; tests check the quick path ran
	// linked: a memory file was seen with a second name (a hard link),
	// through which it can change without an event in the directory. No
	// sync is skipped until a full one finds none.
	linked bool

	// hook, set by tests, is called where another process or a person can
	// step in between two steps: see the calls of at.
	hook func(at, key string)

	spares spares   // files made ahead for writes (see spare.go)
	held   *heldDir // the directory held open between writes, under mu (see held.go)

	mu         sync.Mutex
	log        *slog.Logger
	blocking   func(work func())      // runs the making of files ahead; nil: none are made
	problems   map[string]problemSeen // by stem: last problem reported, to log it once
	exportedAt time.Time              // last check for records without a file
}

// problemSeen remembers a file Sync could not accept. Decode failures
// depend only on the bytes, so while size, mtime and change time stay the
// same the file is not read again.
type problemSeen struct {
	stamp
	reason string
	decode bool // the reason came from Decode (or the stat), not the store
}

// stamp is what a stat says of a file's content without reading it. The
// change time catches what size and mtime miss: an edit that put them
// back (cp -p, rsync -a, tar).
type stamp struct{ size, mtime, ctime int64 }

func stampOf(fi fs.FileInfo) stamp {
	return stamp{fi.Size(), fi.ModTime().UnixNano(), ctime(fi)}
}

// Open prepares root/.prometheus/memories, root being the absolute
// workspace root. The directory is not created until a file is written. It
// returns an error when root is not an absolute existing directory, or when
// .prometheus or .prometheus/memories is a symlink leading outside root (or
// nowhere), or is not a directory.
func Open(root string) (*Dir, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("open mirror: workspace root %q is not absolute", root)
	}
	root = filepath.Clean(root)
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("open mirror: workspace root: %w", err)
	}
	d := &Dir{
		root: root, realRoot: real, path: filepath.Join(root, filepath.FromSlash(relDir)),
		log: slog.New(slog.DiscardHandler), problems: map[string]problemSeen{},
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the directory watch and the files made ahead. A Dir may
// still be used after it; syncs then scan the directory every time, and
// writes make their files as they go.
func (d *Dir) Close() error {
	d.dropSpares(true)
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	d.stopWatch()
	return nil
}

// Path returns the memories directory, root/.prometheus/memories.
func (d *Dir) Path() string { return d.path }

// SetLogger sends the mirror's reports (files refused, imported, deleted)
// to l; the default discards them. A log line names a file and a reason,
// never a value from the file.
func (d *Dir) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	d.mu.Lock()
	d.log = l
	d.mu.Unlock()
}

func (d *Dir) logger() *slog.Logger {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log
}

// check refuses a .prometheus or .prometheus/memories that is a symlink
// leading outside the workspace: following it would let a checked-out
// repository make the server read or write anywhere the user can. Symlinks
// that stay inside the workspace are fine. It runs before every Sync and
// Write, since the tree can change under a running server.
//
// Its errors never match fs.ErrNotExist: to Sync that means "no directory,
// so no memories", and a dangling link or a vanished workspace must not
// delete every record.
func (d *Dir) check() error {
	_, err := d.checkDirs()
	return err
}

// checkDirs is check, and reports whether the directory is there, each
// step to it a directory and none a symlink.
func (d *Dir) checkDirs() (whole bool, err error) {
	_, whole, err = d.walk()
	return whole, err
}

// walk is checkDirs, and returns the directory's stat when whole.
func (d *Dir) walk() (last fs.FileInfo, whole bool, err error) {
	if _, err := os.Stat(d.root); err != nil {
		return nil, false, fmt.Errorf("workspace root %s: %v", d.root, err)
	}
	p := d.root
	whole = true
	for _, name := range strings.Split(relDir, "/") {
		p = filepath.Join(p, name)
		rel := func() string { return d.rel(p) } // for errors only: it runs before every call
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("check %s: %v", rel(), err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			whole = false
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil, false, fmt.Errorf("%s is a symlink that does not resolve; refusing to use it for memories: %v", rel(), err)
			}
			if !within(d.realRoot, target) {
				return nil, false, fmt.Errorf("%s is a symlink to %s, outside the workspace %s; refusing to read or write memories there", rel(), target, d.root)
			}
			if fi, err = os.Stat(target); err != nil {
				return nil, false, fmt.Errorf("check %s: %v", rel(), err)
			}
		}
		if !fi.IsDir() {
			return nil, false, fmt.Errorf("%s is not a directory", rel())
		}
		last = fi
	}
	if !whole {
		last = nil
	}
	return last, whole, nil
}

// within reports whether path is root or lies beneath it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// rel is p relative to the workspace root, slash-separated, for messages.
func (d *Dir) rel(p string) string {
	r, err := filepath.Rel(d.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// relFile is the path of stem's file as a Problem or a log reports it; a
// name shaped like a secret is not shown.
func relFile(name string) string {
	if memory.ScanKey("file name", name) != nil {
		return relDir + "/(a file whose name looks like a secret)"
	}
	return relDir + "/" + name
}

// fileName checks key and returns its file name. Keys reaching the mirror
// were normalised by the store already; this is the last line of defence
// against a name that would leave the directory.
func fileName(key string) (string, error) {
	k, err := memory.NormalizeKey("key", key)
	if err != nil || k != key || strings.ContainsAny(key, `/\`) {
		return "", fmt.Errorf("a key that is not a normalised one cannot name a file in %s", relDir)
	}
	return key + ".md", nil
}

// openIn opens name in r for reading. O_NONBLOCK changes nothing for a
// regular file or a directory, and spares the four calls with which Go,
// on Linux, puts every file it opens in non-blocking mode, offers it to
// the poller, which refuses such files, and puts it back, on a fact's
// write that opens two; and a FIFO put in a file's place is not waited
// on, where opening it blocking would wait for a writer.
func openIn(r *os.Root, name string) (*os.File, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		// A lease another process holds (a file server's) makes a
		// non-blocking open fail where a blocking one waits for it to
		// be given up; a FIFO never makes an open fail so.
		f, err = r.Open(name)
	}
	return f, err
}

// openRoot opens the memories directory as an os.Root, so that no file
// operation below it can leave it even if a name or a symlink tries to.
func (d *Dir) openRoot(create bool) (*os.Root, error) {
	whole, err := d.checkDirs()
	if err != nil {
		return nil, err
	}
	// A directory there whole, no symlink on the way, needs no making.
	if create && !whole {
		if err := os.MkdirAll(d.path, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", relDir, err)
		}
		// MkdirAll may have gone through a symlink created meanwhile.
		if err := d.check(); err != nil {
			return nil, err
		}
	}
	r, err := os.OpenRoot(d.path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", relDir, err)
	}
	return r, nil
}

// Write writes rec's file atomically (a temporary file in the directory's
// .tmp, which git ignores, then renamed over the old one) and returns what
// is on disk. last is what the store last imported from or wrote to the
// file (nil: nothing). A file that already holds exactly these bytes is
// left alone, mtime included. A file that holds anything other than last
// was edited by hand since, and Sync could not import it: it is never
// overwritten, and Write returns a memory.CodeConflict *Error naming it
// and saying how to fix it; so does a file last recorded but now gone
// (removed by hand: writing it again would undo that). The id line of
// last's file is kept (see
// memory.FileState.FileID). It creates the directory if needed. It returns
// an error for a key that is not a normalised key, for an unsafe directory
// (see Open), for an existing file that is not a regular file (a symlink is
// never written through or replaced), and for any I/O failure.
//
// undo (nil when the file was left alone) puts back what the file held
// before, or removes a file Write created, unless the file has changed
// again since: the store calls it when the change it wrote the file for
// is rolled back.
func (d *Dir) Write(rec memory.Record, last *memory.FileState) (st memory.FileState, undo func(), err error) {
	st, undo, err = d.write(rec, last)
	if err == nil {
		d.at("write", rec.Key) // the store's transaction still open
	}
	return st, undo, err
}

func (d *Dir) write(rec memory.Record, last *memory.FileState) (memory.FileState, func(), error) {
	name, err := fileName(rec.Key)
	if err != nil {
		return memory.FileState{}, nil, err
	}
	recID := rec.ID
	if last != nil && last.FileID != "" {
		rec.ID = last.FileID
	}
	data := Encode(rec)
	st := func(fi fs.FileInfo) memory.FileState {
		s := state(rec.Key, fi, data)
		s.ID = recID
		if rec.ID != recID {
			s.FileID = rec.ID
		}
		return s
	}
	r, done, err := d.rootFor(true, true)
	if err != nil {
		d.dropSpares(false) // they may be all that holds its file system
		return memory.FileState{}, nil, err
	}
	defer done()

	perm, keepPerm := fs.FileMode(0o644), false
	var before []byte // what the file held; nil: there was none
	var mtime time.Time
	if last == nil {
		// No file on record: the new one is linked in under the name,
		// which fails if a file is there (a hand-made one, say), and
		// only then is that file looked at, as below. A lookup first
		// would cost a write as much as the link.
		stamp, made, err := d.create(r, rec.Key, name, data)
		if err == nil {
			if made != nil {
				defer made.Close()
			}
			return d.written(r, rec.Key, name, stamp, data, made, st, func() { d.putBack(name, hash(data), nil, perm, mtime) })
		}
		if !errors.Is(err, errNameTaken) {
			return memory.FileState{}, nil, err
		}
		// Something is there that the last sync did not take in: it
		// stays, and the write is a conflict that says what it is,
		// unless it is a file holding what was to be written.
		fi, cur, err := d.current(r, name)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return memory.FileState{}, nil, d.editedAside("write", rec.Key, nil, errNotRegular)
		case err == nil && bytes.Equal(cur, data):
			return st(fi), nil, nil
		}
		return memory.FileState{}, nil, d.edited("write", rec.Key, cur)
	}
	if fi, cur, err := d.current(r, name); err == nil {
		if !fi.Mode().IsRegular() {
			return memory.FileState{}, nil, fmt.Errorf("write %s: it is not a regular file (%s); refusing to replace it", relFile(name), fi.Mode().Type())
		}
		perm, keepPerm = fi.Mode().Perm(), true
		if bytes.Equal(cur, data) {
			return st(fi), nil, nil
		}
		if hash(cur) != last.Hash {
			return memory.FileState{}, nil, d.edited("write", rec.Key, cur)
		}
		if cur == nil {
			cur = []byte{} // before is non-nil: a file was there
		}
		before, mtime = cur, fi.ModTime()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	} else {
		// Removed (or renamed) since the last sync: writing it again
		// would undo that.
		return memory.FileState{}, nil, unsynced(memory.Errorf(memory.CodeConflict, "", "%s was removed or renamed by hand since the last sync; it was not written again. Retry: the removal is imported first", relFile(name)))
	}

	tmp, stamp, err := d.writeTemp(r, name, data, perm, keepPerm)
	if err != nil {
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	d.at("checked", rec.Key)
	if before != nil {
		// Swapped in one step, the file replaced comes out at tmp whatever
		// it was a moment ago: an editor's save renamed over it is seen.
		d.at("aside", rec.Key)
		swapped, err := exchange(r, tmp, name)
		if err != nil {
			r.Remove(tmp)
			if errors.Is(err, fs.ErrNotExist) {
				return memory.FileState{}, nil, unsynced(memory.Errorf(memory.CodeConflict, "", "%s was removed or renamed by hand as it was being written; it was not written again. Retry: the removal is imported first", relFile(name)))
			}
			return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
		}
		if swapped {
			if was, rerr := readBack(r, tmp); changedAside(was, rerr, before) {
				// Edited by hand between the read and the swap: the
				// person's file goes back.
				if _, err := exchange(r, tmp, name); err != nil {
					d.logger().Warn("memory file edited by hand as it was written could not be put back; the edit is in the temporary directory", "path", relFile(name), "temporary", relFile(tmp), "err", err)
					return memory.FileState{}, nil, d.editedAside("write", rec.Key, was, rerr)
				}
				r.Remove(tmp)
				return memory.FileState{}, nil, d.editedAside("write", rec.Key, was, rerr)
			}
			r.Remove(tmp)
			return d.written(r, rec.Key, name, stamp, data, nil, st, func() { d.putBack(name, hash(data), before, perm, mtime) })
		}
	}
	var aside string
	if before != nil {
		// Keep hold of the file being replaced, to see after the rename
		// whether someone edited it since it was read.
		aside = tempFor(name, asideSuffix)
		if err := r.Link(name, aside); err != nil {
			r.Remove(tmp)
			if errors.Is(err, fs.ErrNotExist) {
				return memory.FileState{}, nil, unsynced(memory.Errorf(memory.CodeConflict, "", "%s was removed or renamed by hand as it was being written; it was not written again. Retry: the removal is imported first", relFile(name)))
			}
			if fi, lerr := r.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
				// A directory put there meanwhile cannot be linked.
				return memory.FileState{}, nil, d.editedAside("write", rec.Key, nil, errNotRegular)
			}
			return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
		}
		defer func() {
			if aside != "" {
				r.Remove(aside)
			}
		}()
	}
	if err := r.Rename(tmp, name); err != nil {
		r.Remove(tmp)
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	if aside != "" {
		// One gone from the temporary directory cannot be put back: the
		// write stands, so that file and database agree.
		if was, rerr := readBack(r, aside); changedAside(was, rerr, before) {
			// Edited by hand between the read and the rename: the
			// person's file goes back.
			if err := r.Rename(aside, name); err != nil {
				d.logger().Warn("memory file edited by hand as it was written could not be put back; the edit is in the temporary directory", "path", relFile(name), "temporary", relFile(aside), "err", err)
				aside = "" // kept for the person
			}
			return memory.FileState{}, nil, d.editedAside("write", rec.Key, was, rerr)
		}
	}
	return d.written(r, rec.Key, name, stamp, data, nil, st, func() { d.putBack(name, hash(data), before, perm, mtime) })
}

// errNameTaken is create's error when a file is at the name already.
var errNameTaken = errors.New("a file is there already")

// create writes name, a new file holding data, linked in under its name
// in one step: a file a person created there is never replaced, and
// create returns errNameTaken. It returns the file's stamp,
// and the file made ahead that it linked in, still open, if it took one.
//
// A file made ahead has no name until it is linked in, so it needs
// nothing of the temporary directory: that is made only when none is
// there to take, for the next ones to be made in (and a named temporary
// file makes it too: writeTemp1).
func (d *Dir) create(r *os.Root, key, name string, data []byte) (time.Time, *os.File, error) {
	if !d.hasSpare() {
		if err := makeTempSub(r); err != nil {
			return time.Time{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
		}
	}
	err := errors.ErrUnsupported
	f, stamp := d.spareWith(r, data, 0, false)
	if f != nil {
		d.at("checked", key)
		if err = d.linkIn(r, f, ".", name); err != nil {
			f.Close()
			f = nil
		}
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// None made ahead, or it could not be linked: a named one.
		var tmp string
		if tmp, stamp, err = d.writeTemp1(r, name, data, 0o644, false, false); err != nil {
			return time.Time{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
		}
		d.at("checked", key)
		if err = r.Link(tmp, name); err != nil && !errors.Is(err, fs.ErrExist) {
			// A file system without hard links, if a rename works.
			if err = renameNoReplace(r, tmp, name); err == nil {
				d.noLinks()
			}
		}
		r.Remove(tmp)
	}
	if errors.Is(err, fs.ErrExist) {
		return time.Time{}, nil, errNameTaken
	}
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	return stamp, f, nil
}

// written returns the state of name, just written with data and stamp
// (zero: none), and undo; a file removed by hand the moment it was written
// is a conflict, not an error. made is the file made ahead that was
// linked in as name, still open, or nil.
func (d *Dir) written(r *os.Root, key, name string, stamp time.Time, data []byte, made *os.File, st func(fs.FileInfo) memory.FileState, undo func()) (memory.FileState, func(), error) {
	d.at("renamed", key)
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		// Removed by hand the moment it was written: the removal stands,
		// and the next sync imports it.
		return memory.FileState{}, nil, unsynced(memory.Errorf(memory.CodeConflict, "", "%s was removed or renamed by hand as it was being written; it was not written again. Retry: the removal is imported first", relFile(name)))
	}
	if err != nil {
		undo()
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	s := st(fi)
	if looksStamped(s.MTime) {
		// A stamped state is trusted by its times from now on, so it
		// must be this write's file as written: not one put there since
		// with a stamp of its own (an older version restored with its
		// times), nor this one edited in place keeping its stamp. Such a
		// state is recorded so that no check trusts its times, and the
		// next sync reads the file. (An edit after this read keeping the
		// stamp moves the change time, where the kernel keeps it
		// fine-grained once queried, as Linux does since 6.13.)
		if got, err := reread(r, name, fi, made); s.MTime != stamp.UnixNano() || err != nil || !bytes.Equal(got, data) {
			s.CTime = 0
		}
	}
	return s, undo, nil
}

// current returns name's file info and, for a regular file, its content,
// or an error matching fs.ErrNotExist when there is no file. A file
// removed or replaced while it is read (an editor saving it) is looked at
// again.
func (d *Dir) current(r *os.Root, name string) (fs.FileInfo, []byte, error) {
	for try := 0; ; try++ {
		fi, err := r.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() {
			return fi, nil, err
		}
		d.at("lstat", strings.TrimSuffix(name, ".md"))
		data, err := readRegular(r, name, fi)
		if err != nil && try < 3 && (errors.Is(err, errReplaced) || errors.Is(err, fs.ErrNotExist)) {
			continue
		}
		return fi, data, err
	}
}

// putBack takes back a write or a removal of name, whose content is now
// hash ("" for none): it writes before back (nil: removes the file),
// atomically, with mode perm and modification time mtime. A file that is
// no longer hash was changed again meanwhile, by hand since every writer
// holds the store's lock: it is left alone, and the next sync imports it.
// Failures are logged; the next sync settles what they leave.
func (d *Dir) putBack(name, hash string, before []byte, perm fs.FileMode, mtime time.Time) {
	err := d.putBack1(name, hash, before, perm, mtime)
	if err != nil {
		d.logger().Warn("memory file of a change that was rolled back could not be put back", "path", relFile(name), "err", err)
	}
}

func (d *Dir) putBack1(name, want string, before []byte, perm fs.FileMode, mtime time.Time) error {
	r, err := d.openRoot(before != nil)
	if errors.Is(err, fs.ErrNotExist) && before == nil {
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := r.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if want != "" {
			return nil // removed by hand meanwhile
		}
	case err != nil:
		return err
	case want == "" || !fi.Mode().IsRegular():
		return nil // created meanwhile, by hand
	default:
		cur, err := readRegular(r, name, fi)
		if err != nil {
			return err
		}
		if hash(cur) != want {
			return nil // edited by hand meanwhile
		}
	}
	if before == nil {
		if err := r.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp, _, err := d.writeTemp(r, name, before, perm, true)
	if err != nil {
		return err
	}
	defer r.Remove(tmp)
	d.at("restore", strings.TrimSuffix(name, ".md"))
	if want == "" {
		// Link, not rename: a file created meanwhile is not replaced.
		if err := r.Link(tmp, name); errors.Is(err, fs.ErrExist) {
			return nil
		} else if err != nil {
			return err
		}
	} else if err := r.Rename(tmp, name); err != nil {
		return err
	}
	// The old mtime only now: a temporary file that old is one a sync
	// sweeps as left over from a crash.
	return r.Chtimes(name, time.Now(), mtime)
}

// at calls the test hook, if any.
func (d *Dir) at(at, key string) {
	if d.hook != nil {
		d.hook(at, key)
	}
}

// edited is the error for a file that differs from what the store last
// imported or wrote, which the tool was about to overwrite or remove (op).
// Sync imports such a file before every tool call, so it is one Sync
// refused (or one changed a moment ago); the reason comes from Decode, and
// never quotes the file.
func (d *Dir) edited(op, key string, cur []byte) error {
	path := relFile(key + ".md")
	reason := "it changed since the last sync; retry, and the change is imported first"
	importable := false
	if _, err := Decode(key, cur); err != nil {
		reason = "it cannot be imported: " + err.Error()
	} else {
		d.mu.Lock()
		ps, ok := d.problems[key]
		d.mu.Unlock()
		if ok {
			reason = "it cannot be imported: " + ps.reason
		} else {
			importable = true
		}
	}
	return conflict(op, path, reason, importable)
}

// editedAside is edited for a file a write or a removal moved aside and
// read back (readBack) as was, with err: one that is not a regular file
// is said to be so.
func (d *Dir) editedAside(op, key string, was []byte, err error) error {
	switch {
	case errors.Is(err, errNotRegular):
		return memory.Errorf(memory.CodeConflict, "", "%s is not a regular file now: something was put in its place by hand as the server went to %s it, and it was left there. Move it out of %s, then retry",
			relFile(key+".md"), verbOf(op), relDir)
	case err != nil:
		return conflict(op, relFile(key+".md"), "it cannot be read ("+err.Error()+")", false)
	}
	return d.edited(op, key, was)
}

// conflict is edited's error for the file at path, with why it was not
// imported.
func conflict(op, path, reason string, importable bool) error {
	err := memory.Errorf(memory.CodeConflict, "", "%s was edited by hand and %s; it was left as it is. The server will not %s a change it has not imported: fix the file so that it imports (or move it out of %s), then retry",
		path, reason, verbOf(op), relDir)
	err.Unsynced = importable
	return err
}

// verbOf is what op does to a file, for messages.
func verbOf(op string) string {
	if op == "remove" {
		return "delete"
	}
	return "overwrite"
}

// tempPrefix and tempSuffix frame the names of Write's temporary files: a
// dotfile, so Sync never takes one for a memory.
const (
	tempPrefix = "."
	tempSuffix = ".tmp"
	// asideSuffix ends the name of a file Write or Remove holds aside, in
	// the temporary directory, while it checks that nobody edited it.
	asideSuffix = ".aside"
)

// tempSub is the directory, inside the memories directory, that Write's
// temporary files live in. Its .gitignore ignores everything in it, itself
// included, so a temporary file that a killed process leaves behind is
// never committed; Sync sweeps stale ones.
const (
	tempSub       = ".tmp"
	tempGitignore = "# Temporary files of memory-mcp's atomic writes.\n*\n"
)

// tempDir makes sure the temporary directory and its .gitignore exist and
// returns its path.
func (d *Dir) tempDir() (string, error) {
	r, err := d.openRoot(true)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if err := makeTempSub(r); err != nil {
		return "", err
	}
	return filepath.Join(d.path, tempSub), nil
}

func makeTempSub(r *os.Root) error {
	if err := r.Mkdir(tempSub, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	ignore := tempSub + "/.gitignore"
	if fi, err := r.Lstat(ignore); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(tempGitignore)) {
		return nil
	}
	// Written whole then renamed, so that no process sees it half-written.
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := tempSub + "/.gitignore." + hex.EncodeToString(rnd[:])
	if err := r.WriteFile(tmp, []byte(tempGitignore), 0o644); err != nil {
		return err
	}
	if err := r.Rename(tmp, ignore); err != nil {
		r.Remove(tmp)
		return err
	}
	return nil
}

// tempFor returns a new name in the temporary directory for a file that
// stands for name, ending in suffix: tempSuffix for a new version being
// written, asideSuffix for the old one held aside.
func tempFor(name, suffix string) string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return tempSub + "/" + tempPrefix + name + "." + hex.EncodeToString(rnd[:]) + suffix
}

// writeTemp writes data to a new temporary file for name in the temporary
// directory and returns its path in r. A new file gets perm less the
// umask; with keepPerm it gets exactly perm, the mode of the file it
// replaces.
func (d *Dir) writeTemp(r *os.Root, name string, data []byte, perm fs.FileMode, keepPerm bool) (string, time.Time, error) {
	return d.writeTemp1(r, name, data, perm, keepPerm, true)
}

// writeTemp1 is writeTemp, which takes a file made ahead only with ahead.
// It returns the file's stamp too (zero: none; see stampWritten).
func (d *Dir) writeTemp1(r *os.Root, name string, data []byte, perm fs.FileMode, keepPerm, ahead bool) (string, time.Time, error) {
	if err := makeTempSub(r); err != nil {
		return "", time.Time{}, err
	}
	tmp := tempFor(name, tempSuffix)
	if ahead {
		if f, stamp := d.spareWith(r, data, perm, keepPerm); f != nil {
			err := d.linkIn(r, f, tempSub, path.Base(tmp))
			f.Close()
			if err == nil {
				return tmp, stamp, nil
			}
		}
	}
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", time.Time{}, err
	}
	// No fsync: the rename makes the write atomic for every reader and
	// against a crash of the process, which is what several agents and a
	// killed server need. Only a power cut could leave a file short, and
	// then Sync refuses it as malformed and the database still holds the
	// record; two fsyncs per write would cost more than the whole write.
	_, err = f.Write(data)
	var stamp time.Time
	if err == nil {
		stamp = stampWritten(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && keepPerm {
		err = r.Chmod(tmp, perm)
	}
	if err != nil {
		r.Remove(tmp)
		return "", time.Time{}, err
	}
	return tmp, stamp, nil
}

func state(stem string, fi fs.FileInfo, data []byte) memory.FileState {
	return memory.FileState{Stem: stem, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), CTime: ctime(fi), Hash: hash(data)}
}

func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readBack reads name in r, a file a write or a removal just moved aside,
// as readRegular does (at most one byte past the limit of a memory file);
// a person may have put anything there a moment before, and what is not
// a regular file is not opened but is errNotRegular: a FIFO with a writer
// that never writes would be read for ever with the store's lock held, a
// socket or a symlink leading out of the directory cannot be opened.
func readBack(r *os.Root, name string) ([]byte, error) {
	fi, err := r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	return readRegular(r, name, fi)
}

// errNotRegular is readBack's error for a file that is not a regular one.
var errNotRegular = errors.New("not a regular file")

// changedAside reports whether what a write or a removal moved aside and
// read back (readBack) as was, with err, is not the file it read before
// (want): it was edited, or replaced by something that is not a regular
// file, or by one the server cannot read, which is not one it wrote. One
// gone meanwhile is not: there is nothing to put back.
func changedAside(was []byte, err error, want []byte) bool {
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	return !bytes.Equal(was, want)
}

// errReplaced is readRegular's error for a file that is no longer the one
// that was listed: something was renamed over it meanwhile.
var errReplaced = errors.New("the file changed while it was being read")

// reread returns what name, whose lstat is fi, holds. While name is still
// made, the file this write linked in, it reads it through made: the
// same file whichever way it is read, in one or two calls where opening
// it by name took six.
func reread(r *os.Root, name string, fi fs.FileInfo, made *os.File) ([]byte, error) {
	if made != nil {
		if got, err := made.Stat(); err == nil && os.SameFile(fi, got) {
			buf := make([]byte, min(fi.Size(), maxFileBytes)+1)
			n, err := made.ReadAt(buf, 0)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return buf[:n], nil
		}
	}
	return readRegular(r, name, fi)
}

// readRegular reads name, which lstat said is the regular file fi. The
// file opened must be that same file: if name was swapped for a symlink in
// between, the read is refused rather than followed.
func readRegular(r *os.Root, name string, fi fs.FileInfo) ([]byte, error) {
	f, err := openIn(r, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	got, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !got.Mode().IsRegular() || !os.SameFile(fi, got) {
		return nil, errReplaced
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Remove deletes key's file. A missing file (or directory) is not an error.
// A symlink or other non-regular file in its place is left alone, with a
// warning in the log: it was never the record's file. A file that differs
// from last, what the store last imported or wrote (nil: nothing), was
// edited by hand and is left alone too, with a memory.CodeConflict *Error.
// It returns an error for a bad key, an unsafe directory or an I/O failure.
// undo (nil when no file was removed) puts the file back, unless one was
// created there meanwhile.
func (d *Dir) Remove(key string, last *memory.FileState) (undo func(), err error) {
	undo, err = d.remove(key, last)
	if err == nil {
		d.at("remove", key) // the store's transaction still open
	}
	return undo, err
}

func (d *Dir) remove(key string, last *memory.FileState) (func(), error) {
	name, err := fileName(key)
	if err != nil {
		return nil, err
	}
	r, err := d.openRoot(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fi, cur, err := d.current(r, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w", relFile(name), err)
	}
	if !fi.Mode().IsRegular() {
		d.logger().Warn("memory file is not a regular file; left in place", "path", relFile(name), "type", fi.Mode().Type().String())
		return nil, nil
	}
	if last == nil || hash(cur) != last.Hash {
		return nil, d.edited("remove", key, cur)
	}
	d.at("checked", key)
	// Moved aside first, to see whether someone edited it since it was
	// read: then it goes back.
	if err := makeTempSub(r); err != nil {
		return nil, fmt.Errorf("remove %s: %w", relFile(name), err)
	}
	aside := tempFor(name, asideSuffix)
	if err := r.Rename(name, aside); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // removed by hand meanwhile
	} else if err != nil {
		return nil, fmt.Errorf("remove %s: %w", relFile(name), err)
	}
	d.at("aside", key)
	if was, rerr := readBack(r, aside); changedAside(was, rerr, cur) {
		// Link, not rename: a file created meanwhile is not replaced. A
		// directory cannot be linked: it is renamed back (which, off
		// Linux, replaces an empty directory made there meanwhile).
		err := r.Link(aside, name)
		if err == nil {
			r.Remove(aside)
		} else if fi, lerr := r.Lstat(aside); lerr == nil && fi.IsDir() {
			err = renameNoReplace(r, aside, name)
		}
		if err != nil {
			d.logger().Warn("memory file edited by hand as it was removed could not be put back; the edit is in the temporary directory", "path", relFile(name), "temporary", relFile(aside), "err", err)
		}
		return nil, d.editedAside("remove", key, was, rerr)
	}
	if err := r.Remove(aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove %s: %w", relFile(name), err)
	}
	perm, mtime := fi.Mode().Perm(), fi.ModTime()
	return func() { d.putBack(name, "", cur, perm, mtime) }, nil
}

// recheck returns what the store runs, under its write lock, to make sure
// stem's file is still what a sync read: content hash, or no file at all
// when hash is "". See memory.Recheck.
func (d *Dir) recheck(stem, hash string) memory.Recheck {
	return func() error {
		d.at("recheck", stem)
		if !d.holds(stem, hash) {
			return memory.ErrStale
		}
		return nil
	}
}

// holds reports whether stem's file has content hash, or is absent when
// hash is "". A file it cannot read holds nothing it can vouch for.
func (d *Dir) holds(stem, want string) bool {
	r, err := d.openRoot(false)
	if errors.Is(err, fs.ErrNotExist) {
		return want == ""
	}
	if err != nil {
		return false
	}
	defer r.Close()
	name := stem + ".md"
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return want == ""
	}
	if err != nil || want == "" || !fi.Mode().IsRegular() {
		return false
	}
	data, err := readRegular(r, name, fi)
	return err == nil && hash(data) == want
}

// unsynced marks e as a refusal that a sync resolves: the file changed
// after the last one looked (see memory.Error.Unsynced).
func unsynced(e *memory.Error) *memory.Error {
	e.Unsynced = true
	return e
}
