package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// Problem is a file Sync could not accept. The file is left exactly as it
// is and the database is unchanged for it.
type Problem struct {
	Path   string // relative to the workspace root, e.g. ".prometheus/memories/foo.md"
	Reason string // what is wrong; never a value from the file
}

// Report says what a Sync changed, by key, and which files it refused.
type Report struct {
	Imported []string // records created or updated from their files
	Renamed  []string // records whose file was renamed: their new keys
	Deleted  []string // records deleted because their file is gone
	Problems []Problem
}

// changed reports whether the sync changed anything in the store.
func (r Report) changed() bool {
	return len(r.Imported)+len(r.Renamed)+len(r.Deleted) > 0
}

// racyWindow is how close to now an mtime must be for Sync to distrust an
// unchanged size and mtime. File systems stamp mtimes from a coarse clock,
// so two writes of the same size a few milliseconds apart can share one;
// git handles its index the same way. Mtimes far in the future (a tarball
// from a machine whose clock is ahead) are trusted, or such files would be
// read on every sync.
const racyWindow = 2 * time.Second

// A file Write writes gets a stamp for an mtime: the time 3 s before the
// write, to the millisecond, then the last three digits of the file's
// inode number as microseconds, and stampNanos. Any later write to the
// file, by a person or a tool, sets its mtime to the time of that write,
// which is never the stamp, so a sync knows one of Write's files by its
// size and times alone (see stamped), where a file written within
// racyWindow would otherwise be read and hashed by every sync of every
// process until the window passed: with 8 processes writing facts at once,
// 30 % of their CPU time. The nanoseconds tell a stamp from an mtime that
// a person's tool set back (cp -p, rsync -t, tar), which is still read;
// the inode's digits, a stamp copied onto another file (touch -r, cp -a,
// a copy renamed over it), which is trusted as other mtimes are once its
// change time is out of the racy window. Write reads its file back once
// before its stamp is trusted (see written), so a file put or edited in
// place as the write landed, keeping a stamp, is read by the next sync.
// Where the file system keeps no nanoseconds, or times cannot be set on a
// file descriptor, files keep the mtime of their write and are read as
// before.
const (
	backdate   = racyWindow + time.Second
	stampNanos = 307
)

// stampFor is the stamp of a write at now to the file whose inode is ino.
func stampFor(now time.Time, ino uint64) time.Time {
	return now.Add(-backdate).Truncate(time.Millisecond).Add(time.Duration(ino%1000)*time.Microsecond + stampNanos)
}

// looksStamped reports whether mtime, in nanoseconds, ends as a stamp.
func looksStamped(mtime int64) bool { return mtime%1000 == stampNanos }

// stamped reports whether rec, a file's recorded state, is that of a file
// Write stamped, and fi is still that file: the same size, stamp and
// change time, and an inode whose digits the stamp carries.
func stamped(rec memory.FileState, fi fs.FileInfo) bool {
	return looksStamped(rec.MTime) && uint64(rec.MTime/1000%1000) == inode(fi)%1000 && rec.MTime < rec.CTime-int64(racyWindow) &&
		fi.Size() == rec.Size && fi.ModTime().UnixNano() == rec.MTime && ctime(fi) == rec.CTime
}

// exportEvery is how often Sync looks for records that have no file. They
// come only from writers that had no mirror (older versions, tools run
// without one), so a check per process start and then once a minute is
// enough, and keeps bodies out of the fast path.
const exportEvery = time.Minute

// staleTemp is how old one of Write's temporary files must be before Sync
// deletes it as left over from a crash.
const staleTemp = time.Hour

var (
	tempName  = regexp.MustCompile(`^\.[a-z0-9][a-z0-9._-]*\.md\.[0-9a-f]{12}\.tmp$`)
	asideName = regexp.MustCompile(`^\.[a-z0-9][a-z0-9._-]*\.md\.[0-9a-f]{12}\.aside$`)
)

// Sync brings the store in line with d's files for project p, the files
// being canonical. It is called before every read and write.
//
// Files whose size and mtime match what the store last recorded are not
// read. A changed file whose content hash is the recorded one (a checkout
// rewrote it) is only noted. Any other file is decoded and imported, so
// the file wins; imports run before deletions, so a renamed file (same id,
// new stem) renames its record. Records whose file is gone are deleted; a
// missing directory counts as empty, as after `git rm -r`. Records that
// have no file and never had one (written before the mirror existed) are
// written out.
//
// When two files claim the same id, the file already holding it keeps it
// and the other is imported as a new record (the id in its front matter is
// ignored until the record is next written). A file that now carries the id
// of another record's file (one file moved over another) replaces the
// record it held.
//
// A file that cannot be decoded or imported is reported in Problems and
// logged, and changes nothing. Sync returns an error only when it cannot
// do its job at all: an unsafe directory (see Open), an unreadable
// directory, a database failure or a cancelled ctx. The Report then holds
// what was done before.
func Sync(ctx context.Context, st *memory.Store, p scope.Identity, d *Dir) (Report, error) {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	now := time.Now()
	if rep, ok := d.unchanged(ctx, st, p, now); ok {
		return rep, nil
	}
	if rep, ok := d.stillMissing(ctx, st, p, now); ok {
		return rep, nil
	}
	if d.watch == nil {
		// Watch before scanning, so that a change during the scan is
		// seen by the next sync.
		d.startWatch()
	}
	s := &syncer{ctx: ctx, st: st, p: p, d: d, now: now, present: map[string]bool{}}
	d.linked = false // look finds them again
	err := s.run()
	if err == nil {
		d.mustRead = nil
	}
	d.missing = err == nil && s.missing
	d.forgetProblems(s.present)
	d.clean = err == nil && !s.retry
	d.lastProblems = slices.Clone(s.rep.Problems)
	return s.rep, err
}

// startWatch watches the directory, if it can. d.syncMu must be held.
func (d *Dir) startWatch() {
	fi, err := os.Stat(d.path)
	if err != nil {
		return
	}
	w := newWatch(d.path)
	if w == nil {
		return
	}
	d.watch, d.watched = w, fi
	// A Dir dropped without Close must not keep its inotify instance, of
	// which a user has few.
	d.watchCleanup = runtime.AddCleanup(d, func(w *watch) { w.close() }, w)
}

// stillWatched reports whether the memories directory is the one the
// watch was started on. Moving it, or re-pointing a symlink on its path,
// raises no event on the directory watched. d.syncMu must be held.
func (d *Dir) stillWatched() bool {
	fi, err := os.Stat(d.path)
	if err != nil || !os.SameFile(fi, d.watched) {
		d.stopWatch()
		return false
	}
	return true
}

// stopWatch ends the watch. d.syncMu must be held.
func (d *Dir) stopWatch() {
	if d.watch == nil {
		return
	}
	d.watchCleanup.Stop()
	d.watch.close()
	d.watch = nil
}

// unchanged reports whether a sync can be skipped: the directory is being
// watched, the last sync left nothing to retry, and every file that an
// event names or whose state another write moved (this process's own
// writes, mostly) is on disk exactly as the state records it, or absent
// from both. It then returns that sync's problems again, since the files
// behind them are still there.
func (d *Dir) unchanged(ctx context.Context, st *memory.Store, p scope.Identity, now time.Time) (Report, bool) {
	if d.watch == nil {
		return Report{}, false
	}
	names, known, alive := d.watch.changes()
	if !alive {
		d.stopWatch()
		return Report{}, false
	}
	// The path checks of a full sync (no symlink leading out of the
	// workspace) hold while the path still reaches the directory they
	// passed for when the watch began: one stat instead of one a part.
	if !known || !d.clean || d.linked || d.stateProject != p || d.exportDue(now) || !d.stillWatched() {
		return Report{}, false
	}
	_, changed, whole, err := d.mirrorState(ctx, st, p)
	if err != nil || whole {
		return Report{}, false
	}
	look := make(map[string]bool, len(names)+len(changed))
	for _, name := range names {
		// Sync reads *.md files only, and never dotfiles (temporary files).
		if stem, ok := strings.CutSuffix(name, ".md"); ok && stem != "" && !strings.HasPrefix(name, ".") {
			look[stem] = true
		}
	}
	for _, stem := range changed {
		look[stem] = true
	}
	if len(look) > maxLooks {
		return Report{}, false
	}
	if len(look) > 0 {
		r, done, err := d.rootFor(false, false)
		if err != nil {
			return Report{}, false
		}
		defer done()
		if !d.allRecorded(ctx, st, p, r, look) {
			// The full sync must read these files whatever their
			// size and mtime say: the events are spent, and a
			// second write within the clock's resolution keeps both.
			d.mustRead = look
			return Report{}, false
		}
	}
	d.quickSyncs++
	return Report{Problems: slices.Clone(d.lastProblems)}, true
}

// stillMissing reports whether a sync can be skipped in a workspace that
// has no memories directory, where there is nothing to watch: the last
// full sync found none either and left nothing to retry, there is still
// none, and no write has moved the store's mirror state since. A project
// with no facts yet, whose tools write notes only, used to run a full
// sync, a query and a failed open of the directory, on every call. It
// then returns that sync's problems again. d.syncMu must be held.
func (d *Dir) stillMissing(ctx context.Context, st *memory.Store, p scope.Identity, now time.Time) (Report, bool) {
	if !d.missing || !d.clean || d.stateProject != p || d.exportDue(now) || d.check() != nil {
		return Report{}, false
	}
	if _, err := os.Lstat(d.path); !errors.Is(err, fs.ErrNotExist) {
		return Report{}, false
	}
	_, changed, whole, err := d.mirrorState(ctx, st, p)
	if err != nil || whole || len(changed) > 0 {
		return Report{}, false
	}
	d.quickSyncs++
	return Report{Problems: slices.Clone(d.lastProblems)}, true
}

// commitWaits are the pauses allRecorded makes for another process's
// write to commit.
var commitWaits = []time.Duration{200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond}

// allRecorded reports whether every file of look is as the state records
// it (see asRecorded). A writer renames a file into place before its
// transaction commits, so a file the state does not know at all may be
// another process's write that is about to commit: with processes
// writing facts into one workspace that was every tenth call. For such
// files only, it waits a moment and reads the state's changes again, up
// to a few milliseconds in all, adding the stems those changes name to
// look; the alternative, a full sync, reads every file written in the
// last racyWindow. d.syncMu must be held.
func (d *Dir) allRecorded(ctx context.Context, st *memory.Store, p scope.Identity, r *os.Root, look map[string]bool) bool {
	var pending []string
	for stem := range look {
		if !d.asRecorded(r, stem) {
			pending = append(pending, stem)
		}
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		for _, stem := range pending {
			if _, known := d.state[stem]; known {
				return false // a change the state does not explain
			}
			if _, err := r.Lstat(stem + ".md"); err != nil {
				return false // refused before, or gone again: not a write in flight
			}
		}
		if attempt == len(commitWaits) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(commitWaits[attempt]):
		}
		_, changed, whole, err := d.mirrorState(ctx, st, p)
		if err != nil || whole {
			return false
		}
		for _, stem := range changed {
			if !look[stem] {
				look[stem] = true
				pending = append(pending, stem)
			}
		}
		if len(look) > maxLooks {
			return false
		}
		still := pending[:0]
		for _, stem := range pending {
			if !d.asRecorded(r, stem) {
				still = append(still, stem)
			}
		}
		pending = still
	}
	return true
}

// maxLooks is how many files unchanged checks one by one; more changes
// than that (a checkout) are left to a full sync. Checking a stamped file
// is one lstat, and a full sync lists and lstats the whole directory.
const maxLooks = 512

// asRecorded reports whether stem's file is what the state says: the same
// size, mtime and content, or missing from both. A file refused before with
// the same size and mtime counts as recorded too, since a sync would only
// report it again. d.syncMu must be held.
func (d *Dir) asRecorded(r *os.Root, stem string) bool {
	name := stem + ".md"
	old, known := d.state[stem]
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		d.mu.Lock()
		_, refused := d.problems[stem]
		d.mu.Unlock()
		return !known && !refused
	}
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if links(fi) > 1 {
		d.linked = true // edits through its other name raise no event here
		return false
	}
	size, mtime := fi.Size(), fi.ModTime().UnixNano()
	if _, ok := d.knownProblem(stem, stampOf(fi)); ok {
		return true
	}
	if !known || old.Size != size || old.MTime != mtime {
		return false
	}
	d.mu.Lock()
	_, refused := d.problems[stem]
	d.mu.Unlock()
	if refused {
		return false // fixed since: a full sync clears the report
	}
	if stamped(old, fi) {
		return true // a later write would have moved its mtime
	}
	// Same size and mtime can hide a second write within the clock's
	// resolution: compare the content too. These are few, recent files.
	data, err := readRegular(r, name, fi)
	return err == nil && hash(data) == old.Hash
}

type syncer struct {
	ctx context.Context
	st  *memory.Store
	p   scope.Identity
	d   *Dir
	now time.Time

	rep     Report
	retry   bool // a problem may clear without its file changing (a conflict)
	missing bool // there was no memories directory
	state   map[string]memory.FileState
	present map[string]bool // stems of the .md files on disk, accepted or not
	cands   []candidate
}

type candidate struct {
	rec  memory.Record
	fs   memory.FileState
	prev *memory.FileState // the recorded state when the file was read
}

func (s *syncer) run() error {
	r, err := s.d.openRoot(false)
	missing := errors.Is(err, fs.ErrNotExist)
	s.missing = missing
	if err != nil && !missing {
		return err
	}
	if r != nil {
		defer r.Close()
	}
	// The listing (a stat per file) and the query are the whole cost of a
	// sync that finds nothing to do, and neither needs the other: overlap
	// them.
	var entries []fs.DirEntry
	var listErr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		if !missing {
			entries, listErr = list(r)
		}
	}()
	s.state, _, _, err = s.d.mirrorState(s.ctx, s.st, s.p)
	<-listed
	if err != nil {
		return fmt.Errorf("sync %s: %w", relDir, err)
	}
	if listErr != nil {
		return listErr
	}
	s.present = make(map[string]bool, len(s.state))
	if err := s.scan(r, entries); err != nil {
		return err
	}
	s.dedupe()
	s.d.at("read", "")
	if err := s.imports(); err != nil {
		return err
	}
	if err := s.forgets(r); err != nil {
		return err
	}
	return s.export()
}

// mirrorState returns the store's mirror state for p, brought up to date
// with only the rows changed since the version last read, and the stems
// that changed (all of them after a whole read, reported by whole). The
// map is the Dir's own, brought forward in place (a copy per sync cost a
// write as much as its own queries once there were thousands of files):
// read it, never write it, and let go of it with d.syncMu, which must be
// held.
func (d *Dir) mirrorState(ctx context.Context, st *memory.Store, p scope.Identity) (state map[string]memory.FileState, changed []string, whole bool, err error) {
	since := int64(-1)
	if d.state != nil && d.stateProject == p {
		since = d.stateVersion
	}
	ch, err := st.MirrorChangesSince(ctx, p, since)
	if err != nil {
		return nil, nil, false, err
	}
	if since < 0 {
		d.state, d.stateProject, d.stateVersion = ch.Changed, p, ch.Version
		return d.state, nil, true, nil
	}
	if ch.Version == since {
		return d.state, nil, false, nil
	}
	state = d.state
	for stem, fs := range ch.Changed {
		state[stem] = fs
		changed = append(changed, stem)
	}
	for _, stem := range ch.Gone {
		delete(state, stem)
		changed = append(changed, stem)
	}
	d.state, d.stateVersion = state, ch.Version
	return state, changed, false, nil
}

// list reads the directory, sorted by name so that imports, reports and
// "first by name" in dedupe do not depend on the directory's order.
// Entries of a directory opened in an os.Root come lstat'ed already,
// relative to the directory: no second stat, no symlink followed.
func list(r *os.Root) ([]fs.DirEntry, error) {
	dir, err := openIn(r, ".")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", relDir, err)
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", relDir, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// scan looks at every *.md file and collects those that need importing.
func (s *syncer) scan(r *os.Root, entries []fs.DirEntry) error {
	for _, e := range entries {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		if name == tempSub {
			s.sweepTempSub(r)
			continue
		}
		if strings.HasPrefix(name, ".") {
			s.sweepTemp(r, name)
			continue
		}
		stem, ok := strings.CutSuffix(name, ".md")
		if !ok || stem == "" {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted as we looked: treat as gone
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", relFile(name), err)
		}
		s.present[stem] = true
		if err := s.look(r, name, stem, fi); err != nil {
			return err
		}
	}
	return nil
}

// look decides what one file needs.
func (s *syncer) look(r *os.Root, name, stem string, fi fs.FileInfo) error {
	size, mtime := fi.Size(), fi.ModTime().UnixNano()
	if !fi.Mode().IsRegular() {
		what := "a symlink"
		if fi.Mode()&fs.ModeSymlink == 0 {
			what = "not a regular file"
		}
		s.problem(name, stem, stampOf(fi), true, fmt.Sprintf("is %s; memories must be regular files (it was not followed)", what))
		return nil
	}
	old, known := s.state[stem]
	ct := ctime(fi)
	if links(fi) > 1 {
		s.d.linked = true
	}
	// Unchanged since recorded, by size and times: a stamp on its own
	// file says so at once; another mtime once it is out of the racy
	// window; a stamp copied from another file (cp -a, tar) once the
	// change time is, since the copy could have been made in the tick of
	// the write it copies.
	own := stamped(old, fi)
	age := s.now.Sub(fi.ModTime())
	if looksStamped(old.MTime) && !own {
		age = s.now.Sub(time.Unix(0, ct))
	}
	sameTimes := known && old.Size == size && old.MTime == mtime && old.CTime == ct &&
		(own || age > racyWindow || age < -racyWindow)
	if sameTimes && !s.d.mustRead[stem] {
		s.d.clearProblem(stem)
		return nil
	}
	if ps, ok := s.d.knownProblem(stem, stampOf(fi)); ok {
		s.rep.Problems = append(s.rep.Problems, Problem{Path: relFile(name), Reason: ps.reason})
		return nil
	}
	if size > maxFileBytes {
		s.problem(name, stem, stampOf(fi), true, fmt.Sprintf("file is %d bytes; the limit is %d (256 KiB)", size, maxFileBytes))
		return nil
	}
	data, err := readRegular(r, name, fi)
	if errors.Is(err, errReplaced) {
		// Another writer renamed a new version over it since the listing:
		// look at that one instead; it is what the file is now.
		nfi, lerr := r.Lstat(name)
		if errors.Is(lerr, fs.ErrNotExist) {
			s.retry = true // gone meanwhile: the next sync settles it
			return nil
		}
		if lerr == nil {
			return s.look(r, name, stem, nfi)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		s.retry = true // deleted since the listing: the next sync settles it
		return nil
	}
	if err != nil {
		s.problem(name, stem, stampOf(fi), false, fmt.Sprintf("read: %v", err))
		return nil
	}
	fs := memory.FileState{Stem: stem, Size: size, MTime: mtime, CTime: ct, Hash: hash(data)}
	if known && old.Hash == fs.Hash {
		s.d.clearProblem(stem)
		if old.Size == size && old.MTime == mtime && old.CTime == ct {
			return nil
		}
		fs.ID, fs.FileID = old.ID, old.FileID
		if err := s.st.Touched(s.ctx, s.p, fs, &old, s.d.recheck(stem, fs.Hash)); errors.Is(err, memory.ErrStale) {
			s.retry = true
		} else if err != nil {
			return fmt.Errorf("sync %s: %w", relFile(name), err)
		}
		return nil
	}
	rec, err := Decode(stem, data)
	if err != nil {
		s.problem(name, stem, stampOf(fi), true, err.Error())
		return nil
	}
	var prev *memory.FileState
	if known {
		prev = &old
	}
	s.cands = append(s.cands, candidate{rec: rec, fs: fs, prev: prev})
	return nil
}

// dedupe settles which file keeps an id several files claim (a file was
// copied to start a new one): a file not being imported that already holds
// it (unchanged, or refused and so changing nothing), else the one at the
// record's last stem, else the first by name. The others lose the id.
func (s *syncer) dedupe() {
	claims := map[string][]int{}
	for i, c := range s.cands {
		if c.rec.ID != "" {
			claims[c.rec.ID] = append(claims[c.rec.ID], i)
		}
	}
	if len(claims) == 0 {
		return
	}
	importing := make(map[string]bool, len(s.cands))
	for _, c := range s.cands {
		importing[c.fs.Stem] = true
	}
	held := map[string]bool{}
	for stem, fs := range s.state {
		if s.present[stem] && !importing[stem] && fs.ID != "" {
			held[fs.ID] = true
			if fs.FileID != "" {
				held[fs.FileID] = true // the id line it carries (a second checkout)
			}
		}
	}
	lastStem := s.lastStems()
	for id, idx := range claims {
		keeper := -1
		if !held[id] {
			keeper = idx[0]
			for _, i := range idx {
				if s.cands[i].fs.Stem == lastStem[id] {
					keeper = i
				}
			}
		}
		for _, i := range idx {
			if i == keeper {
				continue
			}
			s.d.logger().Info("memory file repeats another file's id; importing it as a new record",
				"path", relFile(s.cands[i].fs.Stem+".md"))
			s.cands[i].rec.ID = ""
		}
	}
}

// lastStems maps record ids, and the id lines files carry for them, to the
// stem of the file that last held them.
func (s *syncer) lastStems() map[string]string {
	m := make(map[string]string, len(s.state))
	for stem, fs := range s.state {
		if fs.ID != "" {
			m[fs.ID] = stem
		}
		if fs.FileID != "" {
			m[fs.FileID] = stem
		}
	}
	return m
}

func (s *syncer) imports() error {
	lastStem := s.lastStems()
	// Renamed files first: a file renamed away from a stem and a new file
	// at that stem (git mv, then a new file under the old name) must move
	// the record before the new file claims the key.
	moved := func(c candidate) bool {
		last := lastStem[c.rec.ID]
		return c.rec.ID != "" && last != "" && last != c.fs.Stem
	}
	slices.SortStableFunc(s.cands, func(a, b candidate) int {
		switch ma, mb := moved(a), moved(b); {
		case ma && !mb:
			return -1
		case mb && !ma:
			return 1
		}
		return 0
	})
	movedFrom := map[string]bool{} // stems whose state a renamed record took away
	for _, c := range s.cands {
		stem := c.fs.Stem
		name := stem + ".md"
		// The file now carries the id of a record another file held: it was
		// moved over this one, and the record this stem held goes with the
		// file it had. Forgetting it first lets the moved record take the key
		// even when the two are of different types.
		if held := s.state[stem]; c.rec.ID != "" && held.ID != "" && held.ID != c.rec.ID && held.FileID != c.rec.ID && lastStem[c.rec.ID] != "" {
			prev := s.state[stem]
			if rec, ok, err := s.st.Forget(s.ctx, s.p, stem, &prev, s.d.recheck(stem, c.fs.Hash)); errors.Is(err, memory.ErrStale) {
				s.retry = true
				continue // the file at this stem was written meanwhile
			} else if err != nil {
				return fmt.Errorf("sync %s: %w", relFile(name), err)
			} else if ok {
				s.rep.Deleted = append(s.rep.Deleted, rec.Key)
			}
			c.prev = nil // Forget dropped the stem's state
		}
		if movedFrom[stem] {
			c.prev = nil // a record renamed away from it took its state
		}
		out, err := s.st.Import(s.ctx, s.p, c.rec, c.fs, c.prev, s.d.recheck(stem, c.fs.Hash))
		if err != nil {
			if cerr := s.ctx.Err(); cerr != nil {
				return cerr
			}
			if errors.Is(err, memory.ErrStale) {
				// Another writer wrote the file after it was read: what
				// was read is not the file any more. The next sync reads it.
				s.retry = true
				continue
			}
			// Validation failures depend on the file alone; a conflict
			// depends on other records and may clear without the file
			// changing, so it is retried on every sync.
			fixed := errors.Is(err, memory.ErrInvalidArgument) || errors.Is(err, memory.ErrTooLarge) || errors.Is(err, memory.ErrSecretRejected)
			s.problem(name, stem, stamp{c.fs.Size, c.fs.MTime, c.fs.CTime}, fixed, err.Error())
			continue
		}
		s.d.clearProblem(stem)
		if prev := lastStem[out.ID]; prev != "" && prev != stem {
			movedFrom[prev] = true
		}
		if prev := lastStem[out.ID]; prev != "" && prev != stem && !s.present[prev] {
			s.rep.Renamed = append(s.rep.Renamed, out.Key)
			s.d.logger().Info("memory file renamed", "path", relFile(name), "from", relFile(prev+".md"), "key", out.Key)
		} else {
			s.rep.Imported = append(s.rep.Imported, out.Key)
			s.d.logger().Info("memory file imported", "path", relFile(name), "key", out.Key)
		}
	}
	return nil
}

// forgets deletes the records of files that are gone. It runs after the
// imports, which have already moved renamed records to their new stems.
func (s *syncer) forgets(r *os.Root) error {
	stems := make([]string, 0, len(s.state))
	for stem := range s.state {
		if !s.present[stem] {
			stems = append(stems, stem)
		}
	}
	slices.Sort(stems)
	for _, stem := range stems {
		if s.reappeared(r, stem) {
			continue
		}
		prev := s.state[stem]
		rec, deleted, err := s.st.Forget(s.ctx, s.p, stem, &prev, s.d.recheck(stem, ""))
		if errors.Is(err, memory.ErrStale) {
			s.retry = true // written again since the listing: the next sync reads it
			continue
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", relFile(stem+".md"), err)
		}
		if deleted {
			s.rep.Deleted = append(s.rep.Deleted, rec.Key)
			s.d.logger().Info("memory file removed; record deleted", "path", relFile(stem+".md"), "key", rec.Key)
		}
	}
	return nil
}

// reappeared reports whether stem's file is there after all. The listing
// and the state query run at the same time, so the listing can predate a
// file that a writer renamed into place and then committed before the
// state was read: the state knows it, the listing does not, and it must not
// be taken for a removed file. Looking again now, after the state was
// read, finds every such file; the next sync reads it.
func (s *syncer) reappeared(r *os.Root, stem string) bool {
	if r == nil {
		var err error
		if r, err = s.d.openRoot(false); err != nil {
			return false
		}
		defer r.Close()
	}
	_, err := r.Lstat(stem + ".md")
	return err == nil
}

// export writes the files of mirrored records that have none and never
// had one. It goes through Store.Update with an empty patch, which writes a
// missing file inside the store's transaction, so a record deleted
// meanwhile is not resurrected as a file.
func (s *syncer) export() error {
	if !s.d.exportDue(s.now) {
		return nil
	}
	recs, err := s.st.Mirrored(s.ctx, s.p)
	if err != nil {
		return fmt.Errorf("sync %s: %w", relDir, err)
	}
	state := s.state
	if s.rep.changed() {
		if state, err = s.st.MirrorState(s.ctx, s.p); err != nil {
			return fmt.Errorf("sync %s: %w", relDir, err)
		}
	}
	proj := memory.Project{ID: s.p, Mirror: s.d}
	for _, rec := range recs {
		if _, ok := state[rec.Key]; ok || s.present[rec.Key] {
			continue // it has a file, or a file we must not overwrite
		}
		if _, err := s.st.Update(s.ctx, proj, memory.Selector{ID: rec.ID}, memory.Patch{}); err != nil {
			if errors.Is(err, memory.ErrNotFound) {
				continue // expired or deleted meanwhile
			}
			if cerr := s.ctx.Err(); cerr != nil {
				return cerr
			}
			name := rec.Key + ".md"
			s.problem(name, rec.Key, stamp{-1, -1, -1}, false, "record has no file and could not be written to one: "+err.Error())
			continue
		}
		s.d.logger().Info("memory file written for a record that had none", "path", relFile(rec.Key+".md"), "key", rec.Key)
	}
	s.d.exported(s.now)
	return nil
}

// problem reports a file Sync refuses and logs it the first time it is
// seen with this reason. decode marks reasons that depend only on the
// file's bytes, so the file need not be read again while unchanged.
func (s *syncer) problem(name, stem string, at stamp, decode bool, reason string) {
	s.rep.Problems = append(s.rep.Problems, Problem{Path: relFile(name), Reason: reason})
	s.retry = s.retry || !decode
	d := s.d
	d.mu.Lock()
	old, seen := d.problems[stem]
	d.problems[stem] = problemSeen{stamp: at, reason: reason, decode: decode}
	log := d.log
	d.mu.Unlock()
	if !seen || old.reason != reason {
		log.Warn("memory file refused; it was left as it is and nothing was imported", "path", relFile(name), "reason", reason)
	}
}

// sweepTemp deletes a temporary file Write left behind in a crash (in the
// memories directory itself, where older versions wrote them).
func (s *syncer) sweepTemp(r *os.Root, name string) {
	base := path.Base(name)
	temp, aside := tempName.MatchString(base), asideName.MatchString(base)
	if !temp && !aside {
		return
	}
	fi, err := r.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	written := fi.ModTime()
	if aside {
		written = lastChange(fi)
	}
	if s.now.Sub(written) > staleTemp {
		r.Remove(name)
	}
}

// lastChange is when fi's file last changed, in content or name: the later
// of its mtime and its change time. A file Write or Remove holds aside
// keeps its old mtime but was linked or moved there a moment ago, which
// the change time says.
func lastChange(fi fs.FileInfo) time.Time {
	t := fi.ModTime()
	if c := ctime(fi); c > t.UnixNano() {
		t = time.Unix(0, c)
	}
	return t
}

// sweepTempSub sweeps the temporary directory. Its files are ignored by
// git; only stale ones are deleted, since a fresh one may be another
// process's write in progress.
func (s *syncer) sweepTempSub(r *os.Root) {
	if !s.d.exportDue(s.now) {
		return // as seldom as the export check: once per start, then a minute
	}
	dir, err := openIn(r, tempSub)
	if err != nil {
		return
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	for _, name := range names {
		s.sweepTemp(r, tempSub+"/"+name)
	}
}

func (d *Dir) knownProblem(stem string, at stamp) (problemSeen, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps, ok := d.problems[stem]
	return ps, ok && ps.decode && ps.stamp == at
}

func (d *Dir) clearProblem(stem string) {
	d.mu.Lock()
	delete(d.problems, stem)
	d.mu.Unlock()
}

// forgetProblems drops what it remembers of files no longer on disk.
func (d *Dir) forgetProblems(present map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for stem := range d.problems {
		if !present[stem] {
			delete(d.problems, stem)
		}
	}
}

func (d *Dir) exportDue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exportedAt.IsZero() || now.Sub(d.exportedAt) >= exportEvery
}

func (d *Dir) exported(now time.Time) {
	d.mu.Lock()
	d.exportedAt = now
	d.mu.Unlock()
}
