package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
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

// exportEvery is how often Sync looks for records that have no file. They
// come only from writers that had no mirror (older versions, tools run
// without one), so a check per process start and then once a minute is
// enough, and keeps bodies out of the fast path.
const exportEvery = time.Minute

// staleTemp is how old one of Write's temporary files must be before Sync
// deletes it as left over from a crash.
const staleTemp = time.Hour

var tempName = regexp.MustCompile(`^\.[a-z0-9][a-z0-9._-]*\.md\.[0-9a-f]{12}\.tmp$`)

// Sync brings the store in line with d's files for project p, the files
// being canonical. It is called before every read and write.
//
// It lists the directory and stats every file; files whose size and mtime
// match what the store last recorded, and whose mtime is not so recent
// that a second write could share it, are not read. A changed file whose
// content hash is the recorded one (a checkout rewrote it) is only noted.
// Any other file is decoded and imported, so the file wins; imports run
// before deletions, so a renamed file (same id, new stem) renames its
// record. Records whose file is gone are deleted; a missing directory
// counts as empty, as after `git rm -r`. Records that have no file and
// never had one (written before the mirror existed) are written out.
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
	if d.stateProject != p {
		d.scannedAt = time.Time{} // another project's records: all its files are news
	}
	s := &syncer{ctx: ctx, st: st, p: p, d: d, now: time.Now()}
	err := s.run()
	switch {
	case err != nil:
		d.scannedAt = time.Time{} // what was not looked at is looked at next time
	case s.all:
		d.scannedAt, d.onDisk = s.now, s.present
	}
	if s.present != nil {
		d.forgetProblems(s.present)
	}
	return s.rep, err
}

type syncer struct {
	ctx context.Context
	st  *memory.Store
	p   scope.Identity
	d   *Dir
	now time.Time

	rep     Report
	state   map[string]memory.FileState
	all     bool            // every file is looked at, not only stems
	stems   []string        // the files to look at when not all (see Dir.changes)
	present map[string]bool // stems of the .md files on disk, accepted or not
	cands   []candidate
}

type candidate struct {
	rec  memory.Record
	fs   memory.FileState
	prev *memory.FileState // the recorded state when the file was read
}

func (s *syncer) run() error {
	// Listed before the state is read: a file a writer renames into place
	// and commits in between is in the state and not in the listing, and
	// Forget's recheck finds it there.
	var entries []fs.DirEntry
	r, err := s.d.openRoot(false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No directory: no files.
		s.d.unwatch()
		s.all, s.present = true, map[string]bool{}
	case err != nil:
		return err
	default:
		defer r.Close()
		if s.stems, s.all = s.d.changes(r, s.now); s.all {
			s.present = map[string]bool{}
			if entries, err = fs.ReadDir(r.FS(), "."); err != nil {
				return fmt.Errorf("read %s: %w", relDir, err)
			}
		} else {
			s.present = s.d.onDisk // brought forward in place
		}
	}
	if s.state, err = s.d.mirrorState(s.ctx, s.st, s.p); err != nil {
		return fmt.Errorf("sync %s: %w", relDir, err)
	}
	if s.all {
		err = s.scan(r, entries)
	} else {
		err = s.lookAt(r)
	}
	if err != nil {
		return err
	}
	if err := s.dropRecorded(); err != nil {
		return err
	}
	s.dedupe()
	s.d.at("read", "")
	if err := s.imports(); err != nil {
		return err
	}
	if err := s.forgets(); err != nil {
		return err
	}
	return s.export()
}

// mirrorState returns the store's mirror state for p, brought up to date
// with only the rows changed since the version last read. The map is the
// Dir's own, brought forward in place: read it, never write it, and let go
// of it with d.syncMu, which must be held.
func (d *Dir) mirrorState(ctx context.Context, st *memory.Store, p scope.Identity) (map[string]memory.FileState, error) {
	since := int64(-1)
	if d.state != nil && d.stateProject == p {
		since = d.stateVersion
	}
	ch, err := st.MirrorChangesSince(ctx, p, since)
	if err != nil {
		return nil, err
	}
	if since < 0 {
		d.state, d.stateProject = ch.Changed, p
	}
	for stem, fs := range ch.Changed {
		d.state[stem] = fs
	}
	for _, stem := range ch.Gone {
		delete(d.state, stem)
	}
	d.stateVersion = ch.Version
	return d.state, nil
}

// scan looks at every *.md file and collects those that need importing.
// entries come sorted by name (fs.ReadDir), so that imports, reports and
// "first by name" in dedupe do not depend on the directory's order.
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
		fi, err := e.Info() // an lstat: a symlink is not followed
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

// lookAt looks at the files named by s.stems only, the others being as
// the last sync left them.
func (s *syncer) lookAt(r *os.Root) error {
	for _, stem := range s.stems {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		name := stem + ".md"
		fi, err := r.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			delete(s.present, stem)
			continue
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
		s.problem(name, stem, size, mtime, true, fmt.Sprintf("is %s; memories must be regular files (it was not followed)", what))
		return nil
	}
	old, known := s.state[stem]
	age := s.now.Sub(fi.ModTime())
	settled := age > racyWindow || age < -racyWindow
	if settled && known && old.Size == size && old.MTime == mtime {
		s.d.clearProblem(stem)
		return nil
	}
	if ps, ok := s.d.knownProblem(stem, size, mtime); ok && settled {
		s.rep.Problems = append(s.rep.Problems, Problem{Path: relFile(name), Reason: ps.reason})
		return nil
	}
	if size > maxFileBytes {
		s.problem(name, stem, size, mtime, true, fmt.Sprintf("file is %d bytes; the limit is %d (256 KiB)", size, maxFileBytes))
		return nil
	}
	data, err := readRegular(r, name, fi)
	if errors.Is(err, errReplaced) {
		// Another writer renamed a new version over it since the listing:
		// look at that one instead; it is what the file is now.
		nfi, lerr := r.Lstat(name)
		if errors.Is(lerr, fs.ErrNotExist) {
			return nil // gone meanwhile: the next sync settles it
		}
		if lerr == nil {
			return s.look(r, name, stem, nfi)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted since the listing: the next sync settles it
	}
	if err != nil {
		s.problem(name, stem, size, mtime, false, fmt.Sprintf("read: %v", err))
		return nil
	}
	fs := memory.FileState{Stem: stem, Size: size, MTime: mtime, Hash: hash(data)}
	if known && old.Hash == fs.Hash {
		s.d.clearProblem(stem)
		if old.Size == size && old.MTime == mtime {
			return nil
		}
		fs.ID, fs.FileID = old.ID, old.FileID
		if err := s.st.Touched(s.ctx, s.p, fs, &old, s.d.recheck(stem, fs.Hash)); err != nil && !errors.Is(err, memory.ErrStale) {
			return fmt.Errorf("sync %s: %w", relFile(name), err)
		}
		return nil
	}
	rec, err := Decode(stem, data)
	if err != nil {
		s.problem(name, stem, size, mtime, true, err.Error())
		return nil
	}
	var prev *memory.FileState
	if known {
		prev = &old
	}
	s.cands = append(s.cands, candidate{rec: rec, fs: fs, prev: prev})
	return nil
}

// dropRecorded reads the state again when there are files to import, and
// drops those it now holds as they are: another process's write, renamed
// into place before its transaction committed. Import would find that
// too, but under the write lock.
func (s *syncer) dropRecorded() error {
	if len(s.cands) == 0 {
		return nil
	}
	state, err := s.d.mirrorState(s.ctx, s.st, s.p)
	if err != nil {
		return fmt.Errorf("sync %s: %w", relDir, err)
	}
	s.state = state
	s.cands = slices.DeleteFunc(s.cands, func(c candidate) bool {
		cur, ok := state[c.fs.Stem]
		return ok && cur.Hash == c.fs.Hash
	})
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
	if len(s.cands) == 0 {
		return nil
	}
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
				continue
			}
			// Validation failures depend on the file alone; a conflict
			// depends on other records and may clear without the file
			// changing, so it is retried on every sync.
			fixed := errors.Is(err, memory.ErrInvalidArgument) || errors.Is(err, memory.ErrTooLarge) || errors.Is(err, memory.ErrSecretRejected)
			s.problem(name, stem, c.fs.Size, c.fs.MTime, fixed, err.Error())
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
func (s *syncer) forgets() error {
	var stems []string
	if s.all {
		for stem := range s.state {
			if !s.present[stem] {
				stems = append(stems, stem)
			}
		}
		slices.Sort(stems)
	} else {
		for _, stem := range s.stems {
			if _, ok := s.state[stem]; ok && !s.present[stem] {
				stems = append(stems, stem)
			}
		}
	}
	for _, stem := range stems {
		prev := s.state[stem]
		rec, deleted, err := s.st.Forget(s.ctx, s.p, stem, &prev, s.d.recheck(stem, ""))
		if errors.Is(err, memory.ErrStale) {
			continue // there again (written since the listing): the next sync reads it
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
			s.problem(name, rec.Key, -1, -1, false, "record has no file and could not be written to one: "+err.Error())
			continue
		}
		s.d.logger().Info("memory file written for a record that had none", "path", relFile(rec.Key+".md"), "key", rec.Key)
	}
	s.d.exported(s.now)
	return nil
}

// problem reports a file Sync refuses and logs it the first time it is
// seen with this reason. decode marks reasons that depend only on the
// file's bytes, so the file need not be read again while its size and
// mtime stay the same.
func (s *syncer) problem(name, stem string, size, mtime int64, decode bool, reason string) {
	s.rep.Problems = append(s.rep.Problems, Problem{Path: relFile(name), Reason: reason})
	d := s.d
	d.mu.Lock()
	old, seen := d.problems[stem]
	d.problems[stem] = problemSeen{size: size, mtime: mtime, reason: reason, decode: decode}
	log := d.log
	d.mu.Unlock()
	if !seen || old.reason != reason {
		log.Warn("memory file refused; it was left as it is and nothing was imported", "path", relFile(name), "reason", reason)
	}
}

// sweepTemp deletes a temporary file Write left behind in a crash (in the
// memories directory itself, where older versions wrote them).
func (s *syncer) sweepTemp(r *os.Root, name string) {
	if !tempName.MatchString(path.Base(name)) {
		return
	}
	fi, err := r.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if s.now.Sub(fi.ModTime()) > staleTemp {
		r.Remove(name)
	}
}

// sweepTempSub sweeps the temporary directory. Its files are ignored by
// git; only stale ones are deleted, since a fresh one may be another
// process's write in progress.
func (s *syncer) sweepTempSub(r *os.Root) {
	if !s.d.exportDue(s.now) {
		return // as seldom as the export check: once per start, then a minute
	}
	entries, err := fs.ReadDir(r.FS(), tempSub)
	if err != nil {
		return
	}
	for _, e := range entries {
		s.sweepTemp(r, tempSub+"/"+e.Name())
	}
}

func (d *Dir) knownProblem(stem string, size, mtime int64) (problemSeen, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ps, ok := d.problems[stem]
	return ps, ok && ps.decode && ps.size == size && ps.mtime == mtime
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
