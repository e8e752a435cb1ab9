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
//
// Every file operation goes through an os.Root opened on the memories
// directory, so no name or symlink can lead it outside. A file is written
// whole to a temporary file, then renamed over the old one (or linked in,
// for a new file, so that one a person made meanwhile is never replaced).
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
	"path/filepath"
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

	// The mirror state as last read, under syncMu, brought forward by the
	// store's mirror version on each sync rather than read whole.
	state        map[string]memory.FileState
	stateProject scope.Identity
	stateVersion int64

	// What the last syncs saw, under syncMu (see watch.go).
	watcher    *watcher
	watchAgain time.Time       // no watcher is started before then
	noWatch    bool            // set by tests: as when no watcher can be started
	closed     bool            // Close was called: no watcher any more
	scannedAt  time.Time       // start of the last full scan; zero: one is due
	onDisk     map[string]bool // stems of the *.md files there, as last seen

	// hook, set by tests, is called where another process or a person can
	// step in between two steps: see the calls of at.
	hook func(at, key string)

	mu         sync.Mutex
	log        *slog.Logger
	problems   map[string]problemSeen // by stem: last problem reported, to log it once
	exportedAt time.Time              // last check for records without a file
	ws         watchState
}

// problemSeen remembers a file Sync could not accept. Decode failures
// depend only on the bytes, so while size and mtime stay the same the file
// is not read again.
type problemSeen struct {
	size, mtime int64
	reason      string
	decode      bool // the reason came from Decode (or the stat), not the store
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
	if _, err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

// Close stops the Dir's watcher. It always returns nil. A Dir may still be
// used after it, and then scans the directory on every sync.
func (d *Dir) Close() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	d.closed = true
	d.unwatch()
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
// Write, since the tree can change under a running server. It reports
// whether the directory is there.
//
// Its errors never match fs.ErrNotExist: to Sync that means "no directory,
// so no memories", and a dangling link or a vanished workspace must not
// delete every record.
func (d *Dir) check() (exists bool, err error) {
	if _, err := os.Stat(d.root); err != nil {
		return false, fmt.Errorf("workspace root %s: %v", d.root, err)
	}
	p := d.root
	for _, name := range strings.Split(relDir, "/") {
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("check %s: %v", d.rel(p), err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return false, fmt.Errorf("%s is a symlink that does not resolve; refusing to use it for memories: %v", d.rel(p), err)
			}
			if !within(d.realRoot, target) {
				return false, fmt.Errorf("%s is a symlink to %s, outside the workspace %s; refusing to read or write memories there", d.rel(p), target, d.root)
			}
			if fi, err = os.Stat(target); err != nil {
				return false, fmt.Errorf("check %s: %v", d.rel(p), err)
			}
		}
		if !fi.IsDir() {
			return false, fmt.Errorf("%s is not a directory", d.rel(p))
		}
	}
	return true, nil
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

// relFile is the path of a file as a Problem or a log reports it; a name
// shaped like a secret is not shown.
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

// openRoot opens the memories directory as an os.Root, so that no file
// operation below it can leave it even if a name or a symlink tries to.
// With create it makes the directory if it is missing; without, a missing
// directory is an error matching fs.ErrNotExist.
func (d *Dir) openRoot(create bool) (*os.Root, error) {
	exists, err := d.check()
	if err != nil {
		return nil, err
	}
	if create && !exists {
		if err := os.MkdirAll(d.path, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", relDir, err)
		}
		// MkdirAll may have gone through a symlink created meanwhile.
		if _, err := d.check(); err != nil {
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
// not written at all. A file that holds anything other than last was
// edited by hand since, and Sync could not import it: it is never
// overwritten, and Write returns a memory.CodeConflict *Error naming it
// and saying how to fix it; so does a file last recorded but now gone
// (removed by hand: writing it again would undo that). The id line of
// last's file is kept (see memory.FileState.FileID). It creates the
// directory if needed. It returns an error for a key that is not a
// normalised key, for an unsafe directory (see Open), for an existing file
// that is not a regular file (a symlink is never written through or
// replaced), and for any I/O failure.
//
// undo (nil when the file was left alone) puts back what the file held
// before, or removes a file Write created, unless the file has changed
// again since: the store calls it when the change it wrote the file for
// is rolled back.
func (d *Dir) Write(rec memory.Record, last *memory.FileState) (st memory.FileState, undo func(), err error) {
	st, undo, err = d.write(rec, last)
	d.note(rec.Key)
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
	state := func(fi fs.FileInfo) memory.FileState {
		s := memory.FileState{Stem: rec.Key, Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Hash: hash(data), ID: recID}
		if rec.ID != recID {
			s.FileID = rec.ID
		}
		return s
	}
	r, err := d.openRoot(true)
	if err != nil {
		return memory.FileState{}, nil, err
	}
	defer r.Close()
	if last == nil {
		return d.create(r, rec.Key, name, data, state)
	}

	fi, cur, err := d.current(r, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Removed (or renamed) since the last sync: writing it again
		// would undo that.
		return memory.FileState{}, nil, unsynced(memory.Errorf(memory.CodeConflict, "", "%s was removed or renamed by hand since the last sync; it was not written again. Retry: the removal is imported first", relFile(name)))
	case err != nil:
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	case !fi.Mode().IsRegular():
		return memory.FileState{}, nil, fmt.Errorf("write %s: it is not a regular file (%s); refusing to replace it", relFile(name), fi.Mode().Type())
	case bytes.Equal(cur, data):
		return state(fi), nil, nil
	case hash(cur) != last.Hash:
		return memory.FileState{}, nil, d.edited("write", rec.Key, cur)
	}
	perm, mtime := fi.Mode().Perm(), fi.ModTime()
	tmp, err := writeTemp(r, name, data, perm, true)
	if err != nil {
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	d.at("checked", rec.Key)
	if err := d.still(r, "write", rec.Key, name, cur); err != nil {
		r.Remove(tmp)
		if errors.Is(err, fs.ErrNotExist) {
			return memory.FileState{}, nil, removedAsWritten(name)
		}
		return memory.FileState{}, nil, err
	}
	if err := whenFree(func() error { return r.Rename(tmp, name) }); err != nil {
		r.Remove(tmp)
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	return d.written(r, rec.Key, name, state, func() { d.putBack(name, hash(data), cur, perm, mtime) })
}

// create writes name, a new file holding data. The temporary file is
// linked in under the name, which fails if a file is there (a hand-made
// one, say): that file is only then looked at, and stays.
func (d *Dir) create(r *os.Root, key, name string, data []byte, state func(fs.FileInfo) memory.FileState) (memory.FileState, func(), error) {
	tmp, err := writeTemp(r, name, data, 0o644, false)
	if err != nil {
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	defer r.Remove(tmp)
	d.at("checked", key)
	err = linkNew(r, tmp, name)
	if errors.Is(err, fs.ErrExist) {
		// Something is there that the last sync did not take in: it
		// stays, and the write is a conflict that says what it is,
		// unless it is a file holding what was to be written.
		fi, cur, err := d.current(r, name)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return memory.FileState{}, nil, notRegular("write", key)
		case err == nil && bytes.Equal(cur, data):
			return state(fi), nil, nil
		}
		return memory.FileState{}, nil, d.edited("write", key, cur)
	}
	if err != nil {
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	return d.written(r, key, name, state, func() { d.putBack(name, hash(data), nil, 0, time.Time{}) })
}

// linkNew gives tmp the name name, unless something has that name already
// (an error matching fs.ErrExist): nothing is ever replaced. On a file
// system without hard links it looks, then renames.
func linkNew(r *os.Root, tmp, name string) error {
	err := r.Link(tmp, name)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, lerr := r.Lstat(name); !errors.Is(lerr, fs.ErrNotExist) {
		if lerr == nil {
			return fs.ErrExist
		}
		return lerr
	}
	return r.Rename(tmp, name)
}

// written returns the state of name, just written, and undo; a file
// removed by hand the moment it was written is a conflict, not an error.
func (d *Dir) written(r *os.Root, key, name string, state func(fs.FileInfo) memory.FileState, undo func()) (memory.FileState, func(), error) {
	d.at("renamed", key)
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		// The removal stands, and the next sync imports it.
		return memory.FileState{}, nil, removedAsWritten(name)
	}
	if err != nil {
		undo()
		return memory.FileState{}, nil, fmt.Errorf("write %s: %w", relFile(name), err)
	}
	return state(fi), undo, nil
}

func removedAsWritten(name string) error {
	return unsynced(memory.Errorf(memory.CodeConflict, "", "%s was removed or renamed by hand as it was being written; it was not written again. Retry: the removal is imported first", relFile(name)))
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

// still looks at name once more right before a write replaces it or a
// removal removes it, since a person may have saved it after the first
// look found it holding cur: anything else there now is theirs, and the
// call is refused. A file gone meanwhile is an error matching
// fs.ErrNotExist, for the caller to settle.
func (d *Dir) still(r *os.Root, op, key, name string, cur []byte) error {
	fi, now, err := d.current(r, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return err
	case err != nil:
		return conflict(op, relFile(name), "it cannot be read ("+err.Error()+")", false)
	case !fi.Mode().IsRegular():
		return notRegular(op, key)
	case !bytes.Equal(now, cur):
		return d.edited(op, key, now)
	}
	return nil
}

// putBack takes back a write or a removal of name, whose content is now
// hash ("" for none): it writes before back (nil: removes the file),
// atomically, with the mode perm and the modification time mtime it had.
// A file that is no longer hash was changed again meanwhile, by hand since
// every writer holds the store's lock: it is left alone, and the next sync
// imports it. Failures are logged; the next sync settles what they leave.
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
	tmp, err := writeTemp(r, name, before, perm, true)
	if err != nil {
		return err
	}
	defer r.Remove(tmp)
	d.at("restore", strings.TrimSuffix(name, ".md"))
	if want == "" {
		// Linked, not renamed: a file created meanwhile is not replaced.
		if err := linkNew(r, tmp, name); errors.Is(err, fs.ErrExist) {
			return nil
		} else if err != nil {
			return err
		}
	} else if err := whenFree(func() error { return r.Rename(tmp, name) }); err != nil {
		return err
	}
	// The file's own mtime back, so that it is as it was before the call.
	// Only now: a temporary file that old is one a sync sweeps as left
	// over from a crash.
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

// notRegular is the error for something that is not a regular file found
// in key's file's place as a write or a removal (op) was under way.
func notRegular(op, key string) error {
	return memory.Errorf(memory.CodeConflict, "", "%s is not a regular file now: something was put in its place by hand as the server went to %s it, and it was left there. Move it out of %s, then retry",
		relFile(key+".md"), verbOf(op), relDir)
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

// unsynced marks e as a refusal that a sync resolves: the file changed
// after the last one looked (see memory.Error.Unsynced).
func unsynced(e *memory.Error) *memory.Error {
	e.Unsynced = true
	return e
}

// tempSub is the directory, inside the memories directory, that Write's
// temporary files live in: on the same file system, so that the rename is
// atomic. Its .gitignore ignores everything in it, itself included, so a
// temporary file that a killed process leaves behind is never committed;
// Sync sweeps stale ones.
const (
	tempSub       = ".tmp"
	tempGitignore = "# Temporary files of memory-mcp's atomic writes.\n*\n"
)

// makeTempSub makes sure the temporary directory and its .gitignore exist.
func makeTempSub(r *os.Root) error {
	if err := r.Mkdir(tempSub, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	ignore := tempSub + "/.gitignore"
	if fi, err := r.Lstat(ignore); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(tempGitignore)) {
		return nil
	}
	// Written whole then renamed, so that no process sees it half-written.
	tmp := ignore + "." + randomHex()
	if err := r.WriteFile(tmp, []byte(tempGitignore), 0o644); err != nil {
		return err
	}
	if err := r.Rename(tmp, ignore); err != nil {
		r.Remove(tmp)
		return err
	}
	return nil
}

// busyWait is how long whenFree keeps trying.
const busyWait = 2 * time.Second

// whenFree runs op, a rename over a memory file or its removal, and runs it
// again while it fails because the file is busy (see busy: Windows only),
// for up to busyWait, then returns its last error.
func whenFree(op func() error) error {
	return retryBusy(op, busy, busyWait)
}

func retryBusy(op func() error, busy func(error) bool, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		err := op()
		if err == nil || !busy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}

func randomHex() string {
	var rnd [6]byte
	rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// writeTemp writes data to a new temporary file for name in the temporary
// directory, as os.CreateTemp would (os.Root has no CreateTemp), and
// returns its path in r. A new file gets perm less the umask; with
// keepPerm it gets exactly perm, the mode of the file it replaces.
//
// There is no fsync: the rename makes the write atomic for every reader
// and against a crash of the process, which is what several agents and a
// killed server need. Only a power cut could leave a file short, and then
// Sync refuses it as malformed while the database still holds the record.
func writeTemp(r *os.Root, name string, data []byte, perm fs.FileMode, keepPerm bool) (string, error) {
	if err := makeTempSub(r); err != nil {
		return "", err
	}
	tmp := tempSub + "/." + name + "." + randomHex() + ".tmp"
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && keepPerm {
		err = r.Chmod(tmp, perm)
	}
	if err != nil {
		r.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// errReplaced is readRegular's error for a file that is no longer the one
// that was listed: something was renamed over it meanwhile.
var errReplaced = errors.New("the file changed while it was being read")

// readRegular reads name, which lstat said is the regular file fi, and at
// most one byte past the limit of a memory file. The file opened must be
// that same file: if name was swapped for a symlink or a FIFO in between,
// the read is refused rather than followed. The open is non-blocking, so
// that a FIFO put in the file's place is not waited on for a writer.
func readRegular(r *os.Root, name string, fi fs.FileInfo) ([]byte, error) {
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
		// A lease another process holds (a file server's) makes a
		// non-blocking open fail where a blocking one waits for it to
		// be given up; a FIFO never makes an open fail so.
		f, err = r.Open(name)
	}
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
	return io.ReadAll(io.LimitReader(f, maxFileBytes+1))
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
	d.note(key)
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
	if err := d.still(r, "remove", key, name, cur); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // removed by hand meanwhile
	} else if err != nil {
		return nil, err
	}
	if err := whenFree(func() error { return r.Remove(name) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
