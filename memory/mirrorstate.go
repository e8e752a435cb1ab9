package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"prom.codes/memory-mcp/scope"
)

// MirrorState returns what the mirror last recorded of each file of project
// p, by stem.
func (s *Store) MirrorState(ctx context.Context, p scope.Identity) (map[string]FileState, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT stem, size, mtime, hash, record_id, ctime, file_id FROM mirror_files WHERE project = $1`, string(p))
	if err != nil {
		return nil, fmt.Errorf("mirror state: %w", err)
	}
	defer rows.Close()
	out := map[string]FileState{}
	for rows.Next() {
		var st FileState
		if err := rows.Scan(&st.Stem, &st.Size, &st.MTime, &st.Hash, &st.ID, &st.CTime, &st.FileID); err != nil {
			return nil, err
		}
		out[st.Stem] = st
	}
	return out, rows.Err()
}

// fileState returns what the mirror last recorded of stem's file, or nil.
func fileState(ctx context.Context, tx *sql.Tx, p scope.Identity, stem string) (*FileState, error) {
	st := FileState{Stem: stem}
	err := tx.QueryRowContext(ctx, `SELECT size, mtime, hash, record_id, ctime, file_id FROM mirror_files WHERE project = $1 AND stem = $2`,
		string(p), stem).Scan(&st.Size, &st.MTime, &st.Hash, &st.ID, &st.CTime, &st.FileID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mirror state of %s: %w", stem, err)
	}
	return &st, nil
}

// storedState is st as mirror_files keeps it: no file id that is the
// record's own.
func storedState(st FileState) FileState {
	if st.FileID == st.ID {
		st.FileID = ""
	}
	return st
}

func setFileState(ctx context.Context, tx *sql.Tx, p scope.Identity, st FileState) error {
	st = storedState(st)
	_, err := tx.ExecContext(ctx, `INSERT INTO mirror_files (project, stem, size, mtime, hash, record_id, ctime, file_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (project, stem) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, hash = excluded.hash,
			record_id = excluded.record_id, ctime = excluded.ctime, file_id = excluded.file_id`,
		string(p), st.Stem, st.Size, st.MTime, st.Hash, st.ID, st.CTime, st.FileID)
	return err
}

// beginWrite begins a write transaction that ctx ending does not roll back
// behind the caller's back. database/sql would, from another goroutine, the
// moment ctx ends: the write lock would go before the files changed under
// it are put back, and another writer could find them disagreeing with the
// database. Statements still run with ctx, so a cancelled call fails at its
// next one and tx1 puts the files back, then rolls back. Waiting for the
// lock still ends with ctx.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, func(commit bool) error, error) {
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	tx, end, err := s.b.BeginWrite(txCtx)
	if !stop() {
		// ctx ended while the transaction began: no file was touched.
		if err == nil {
			end(false)
		}
		return nil, nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return tx, end, nil
}

// undoOnRollback keeps undo, a file operation's, for undoFiles.
func (s *Store) undoOnRollback(undo func()) {
	if undo != nil {
		s.fileUndo = append(s.fileUndo, undo)
	}
}

// undoFiles takes back, newest first, the file operations of a write
// transaction that is not committing; tx1 clears them after a commit. A
// file written or removed for a change that is then rolled back would
// leave disk and database disagreeing: a file no record explains, which a
// sync imports (the failed write happens after all), or a record whose
// file is gone, which the next write takes for a removal by hand.
func (s *Store) undoFiles() {
	for i := len(s.fileUndo) - 1; i >= 0; i-- {
		s.fileUndo[i]()
	}
	s.fileUndo = nil
}

func undoFile(undo func()) {
	if undo != nil {
		undo()
	}
}

// mirrorError is the error of a file the mirror could not write or remove:
// its own *Error (a conflict with a human's edit) as it is, else internal.
func mirrorError(op, key string, err error) error {
	var me *Error
	if errors.As(err, &me) {
		return me
	}
	return Errorf(CodeInternal, "", "%s markdown for %s: %v", op, key, err)
}

// ErrStale is the error of Import, Touched and Forget when the file's
// recorded state has moved on from prev, the state the caller read before
// it looked at the file: another writer wrote (or removed) the file
// meanwhile, so what the caller saw may be older than what is on disk now;
// or, for Import, the writer of the file has recorded it since, so there
// is nothing to import. Nothing is changed; the next sync looks at the
// file again.
var ErrStale = errors.New("the file was written again while it was being read")

// Recheck looks at a file again from inside the transaction that records
// what the caller read of it. Every writer of the mirror's files holds the
// store's write lock while it writes or removes one and records it, so
// what Recheck sees there no writer changes before the commit. It returns
// ErrStale when the file is no longer what the caller read.
//
// The recorded state alone cannot tell: a file read while a writer was
// creating it (renamed into place, not yet committed), then removed by
// another writer, leaves the state as the caller found it, empty, and
// importing what was read would bring back a record just deleted, with a
// file that is gone.
type Recheck func() error

// checkPrev returns ErrStale when cur, the recorded state of st's file,
// holds content that is neither what was read (st) nor what was recorded
// before (prev), or is gone: another writer wrote or deleted the file
// after it was read; or when recheck (if any) says the file moved on.
func checkPrev(cur *FileState, st FileState, prev *FileState, recheck Recheck) error {
	if cur == nil && prev != nil || cur != nil && cur.Hash != st.Hash && (prev == nil || cur.Hash != prev.Hash) {
		return ErrStale
	}
	if recheck != nil {
		return recheck()
	}
	return nil
}

// Touched records that a file was seen unchanged in content but with a new
// size, mtime or change time (a checkout rewrote it), so the next sync
// skips it again. prev is the state the caller read before it read the
// file, and recheck (nil: none) looks at the file again; see ErrStale.
func (s *Store) Touched(ctx context.Context, p scope.Identity, st FileState, prev *FileState, recheck Recheck) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := fileState(ctx, tx, p, st.Stem)
		if err == nil {
			err = checkPrev(cur, st, prev, recheck)
		}
		if err != nil {
			return err
		}
		return setFileState(ctx, tx, p, st)
	})
}

// Import makes rec, read from the markdown file st describes, the project's
// record: the file wins. rec carries the file's id (possibly empty), type,
// key (the stem), description, body, tags, confidence and created time. A
// record with that id, or the one the file held before, is updated in place,
// so a renamed file renames the key. The file itself is never written.
// prev is the file's recorded state that the caller read before it read the
// file (nil: none), and recheck (nil: none) looks at the file again under
// the write lock. Errors: the validation errors of Put (secrets included),
// CodeConflict when another record holds the key, ErrStale.
func (s *Store) Import(ctx context.Context, p scope.Identity, rec Record, st FileState, prev *FileState, recheck Recheck) (Record, error) {
	conf := rec.Confidence
	w := Write{
		Scope: scope.Project, Type: rec.Type, Key: rec.Key, Description: rec.Description, Body: rec.Body,
		Tags: rec.Tags, Confidence: &conf, Source: FromMarkdown, Metadata: rec.Metadata,
	}
	if err := validate(&w); err != nil {
		return Record{}, err
	}
	if w.Type != Semantic && w.Type != Procedural {
		return Record{}, Errorf(CodeInvalidArgument, "type", "%q cannot live in a markdown file (semantic or procedural only)", w.Type)
	}
	var out Record
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := fileState(ctx, tx, p, st.Stem)
		if err != nil {
			return err
		}
		if cur != nil && cur.Hash == st.Hash {
			// The writer that made the file recorded it after the caller
			// read the state: the store holds the file already.
			return ErrStale
		}
		if err := checkPrev(cur, st, prev, recheck); err != nil {
			return err
		}
		old, found, err := s.fileOwner(ctx, tx, p, rec.ID, st.Stem, w.Key)
		if err != nil {
			return err
		}
		if !found {
			id := rec.ID
			tomb, err := forgotten(ctx, tx, p, rec.ID)
			if err != nil {
				return err
			}
			if tomb != nil {
				id = tomb.id
			}
			if id != "" {
				// Ids are unique across projects, but a second clone or
				// worktree of the repository holds the same files: its
				// copy of the record gets an id of its own.
				var n int
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records WHERE id = $1`, id).Scan(&n); err != nil {
					return err
				}
				if n > 0 {
					id = ""
				}
			}
			if tomb != nil {
				// The file of a record removed a moment ago is back: so is
				// the record, with its use and its expiry.
				w.UseCount = &tomb.useCount
				if tomb.expiresAt.Valid && tomb.expiresAt.Int64 > s.now().UnixNano() {
					t := time.Unix(0, tomb.expiresAt.Int64).UTC()
					w.keepExpiry, w.expiresAt = true, &t
				}
			}
			out, _, err = s.put(ctx, tx, Project{ID: p}, w, id)
			if err != nil {
				return err
			}
			if tomb != nil {
				if _, err := tx.ExecContext(ctx, `UPDATE records SET last_accessed_at = $1 WHERE id = $2`, tomb.lastAccessed, out.ID); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_forgotten WHERE project = $1 AND id = $2`, string(p), tomb.id); err != nil {
					return err
				}
			}
		} else {
			out = old
			out.Type, out.Key, out.Description, out.Body, out.Tags, out.Confidence, out.Source =
				w.Type, w.Key, w.Description, w.Body, w.Tags, *w.Confidence, FromMarkdown
			out.Metadata = w.Metadata
			if out.Key != old.Key || out.Type != old.Type {
				// One file per key: put refuses a key the other mirrored
				// type holds, and so must a rename or a change of type.
				var n int
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records WHERE project = $1 AND scope = 0 AND type IN ('semantic', 'procedural') AND key = $2 AND id <> $3`,
					string(p), out.Key, old.ID).Scan(&n); err != nil {
					return err
				}
				if n > 0 {
					return Errorf(CodeConflict, "key", "%q is held by another project record", out.Key)
				}
			}
			if !rec.CreatedAt.IsZero() {
				out.CreatedAt = rec.CreatedAt.UTC()
			}
			if !sameContent(old, out) && out.ExpiresAt != nil && !out.ExpiresAt.After(s.now()) {
				// A file edited after its record expired: the edit says it
				// is still wanted.
				out.ExpiresAt = nil
			}
			if !sameContent(old, out) || old.Source != FromMarkdown {
				out.UpdatedAt = s.now().UTC()
				if err := s.store(ctx, tx, string(p), out, updateAll); err != nil {
					if strings.Contains(err.Error(), "UNIQUE") {
						return Errorf(CodeConflict, "key", "%q is held by another project record", w.Key)
					}
					return err
				}
			}
			if old.Key != out.Key {
				if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_files WHERE project = $1 AND stem = $2`, string(p), old.Key); err != nil {
					return err
				}
			}
		}
		if !rec.CreatedAt.IsZero() && !found {
			if _, err := tx.ExecContext(ctx, `UPDATE records SET created_at = $1 WHERE id = $2`, rec.CreatedAt.UnixNano(), out.ID); err != nil {
				return err
			}
			out.CreatedAt = rec.CreatedAt.UTC()
		}
		st.ID, st.FileID = out.ID, ""
		if rec.ID != "" && rec.ID != out.ID {
			// The file's id line names a record of another checkout of the
			// repository: keep the line as it is when the file is written.
			// An id no record holds any more is replaced by the record's.
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records WHERE id = $1 AND project <> $2`, rec.ID, string(p)).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				st.FileID = rec.ID
			}
		}
		return setFileState(ctx, tx, p, st)
	})
	return out, err
}

// tomb is what Forget kept of a record whose file was removed.
type tomb struct {
	id                      string
	useCount                int64
	lastAccessed, expiresAt sql.NullInt64
}

// forgotten finds what Forget kept of the record a file with id line id
// held, if anything.
func forgotten(ctx context.Context, tx *sql.Tx, p scope.Identity, id string) (*tomb, error) {
	if id == "" {
		return nil, nil
	}
	var t tomb
	err := tx.QueryRowContext(ctx, `SELECT id, use_count, last_accessed_at, expires_at FROM mirror_forgotten
		WHERE project = $1 AND (id = $2 OR file_id = $3) ORDER BY forgotten_at DESC LIMIT 1`, string(p), id, id).
		Scan(&t.id, &t.useCount, &t.lastAccessed, &t.expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records WHERE id = $1`, t.id).Scan(&n); err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, nil // the id is taken again (a tool wrote it meanwhile)
	}
	return &t, nil
}

// forgetKeep is how long Forget keeps a removed file's record in mind.
const forgetKeep = 90 * 24 * time.Hour

// fileOwner finds the record a file speaks for: the one with its id, else
// the one it held last time, else a mirrored record with its key.
func (s *Store) fileOwner(ctx context.Context, tx *sql.Tx, p scope.Identity, id, stem, key string) (Record, bool, error) {
	try := func(where string, args ...any) (Record, bool, error) {
		r, err := getOne(ctx, tx, `WHERE r.project = $1 AND r.scope = 0 AND r.type IN ('semantic', 'procedural') AND `+where, append([]any{string(p)}, args...)...)
		if errors.Is(err, ErrNotFound) {
			return Record{}, false, nil
		}
		return r, err == nil, err
	}
	if id != "" {
		if r, ok, err := try(`r.id = $2`, id); ok || err != nil {
			return r, ok, err
		}
		if r, ok, err := try(`r.id IN (SELECT record_id FROM mirror_files WHERE project = $1 AND file_id = $2)`, id); ok || err != nil {
			return r, ok, err
		}
	}
	var held string
	err := tx.QueryRowContext(ctx, `SELECT record_id FROM mirror_files WHERE project = $1 AND stem = $2`, string(p), stem).Scan(&held)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, err
	}
	if held != "" {
		if r, ok, err := try(`r.id = $2`, held); ok || err != nil {
			return r, ok, err
		}
	}
	return try(`r.key = $2`, key)
}

// Forget handles a file that is gone: the record it held is deleted, unless
// it has moved to another file meanwhile. prev is the file's state the
// caller read before it found the file gone: when another writer has
// written the file since (the state moved on), or recheck (nil: none)
// says the file is not as the caller found it, Forget returns ErrStale and
// changes nothing. The record is hidden at once, but what the file does
// not hold (its use count, last access and expiry) is kept for a while, so
// that the same file coming back (same id line) brings the record back as
// it was. It returns the deleted record, if any.
func (s *Store) Forget(ctx context.Context, p scope.Identity, stem string, prev *FileState, recheck Recheck) (Record, bool, error) {
	var rec Record
	var deleted bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := fileState(ctx, tx, p, stem)
		if err != nil || cur == nil {
			return err
		}
		if prev != nil && (cur.Hash != prev.Hash || cur.ID != prev.ID) {
			return ErrStale
		}
		if recheck != nil {
			if err := recheck(); err != nil {
				return err
			}
		}
		held, fileID := cur.ID, cur.FileID
		if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_files WHERE project = $1 AND stem = $2`, string(p), stem); err != nil {
			return err
		}
		r, err := getOne(ctx, tx, `WHERE r.id = $1 AND r.project = $2 AND r.key = $3`, held, string(p), stem)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rec, deleted = r, true
		now := s.now().UnixNano()
		if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_forgotten WHERE forgotten_at < $1`, now-int64(forgetKeep)); err != nil {
			return err
		}
		if fileID == "" {
			fileID = r.ID
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO mirror_forgotten (project, id, file_id, use_count, last_accessed_at, expires_at, forgotten_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (project, id) DO UPDATE SET file_id = excluded.file_id, use_count = excluded.use_count,
			last_accessed_at = excluded.last_accessed_at, expires_at = excluded.expires_at, forgotten_at = excluded.forgotten_at`, string(p), r.ID, fileID, r.UseCount, nanos(r.LastAccessedAt), nanos(r.ExpiresAt), now); err != nil {
			return err
		}
		return s.remove(ctx, tx, Project{ID: p}, r, false)
	})
	return rec, deleted, err
}

// Mirrored returns every project record of p that belongs in the markdown
// mirror, with bodies, by key.
func (s *Store) Mirrored(ctx context.Context, p scope.Identity) ([]Record, error) {
	return queryRecords(ctx, s.db, `SELECT `+cols+` FROM records r WHERE r.project = $1 AND r.scope = 0 AND r.type IN ('semantic', 'procedural') ORDER BY r.key`, string(p))
}

// MirrorChanges is how project p's mirror state moved after a version.
type MirrorChanges struct {
	Version int64                // the version now
	Changed map[string]FileState // by stem: written or rewritten since
	Gone    []string             // stems no longer in the state
}

// MirrorChangesSince returns what changed in project p's mirror state after
// version since, in any process, and the version that brings it to; since
// < 0 returns the whole state as Changed. All of it is read in one
// statement, so it is one consistent view.
func (s *Store) MirrorChangesSince(ctx context.Context, p scope.Identity, since int64) (MirrorChanges, error) {
	return retry(ctx, s, func() (MirrorChanges, error) { return s.mirrorChangesSince1(ctx, p, since) })
}

func (s *Store) mirrorChangesSince1(ctx context.Context, p scope.Identity, since int64) (MirrorChanges, error) {
	if since >= 0 { // most calls find nothing changed: the version alone tells
		if v, err := s.MirrorVersion(ctx, p); err != nil || v == since {
			return MirrorChanges{Version: v, Changed: map[string]FileState{}}, err
		}
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT 0, stem, size, mtime, hash, record_id, ctime, file_id FROM mirror_files WHERE project = @p AND v > @since
		UNION ALL SELECT 1, stem, 0, 0, '', '', 0, '' FROM mirror_gone WHERE project = @p AND v > @since AND @since >= 0
		UNION ALL SELECT 2, '', version, 0, '', '', 0, '' FROM mirror_versions WHERE project = @p`,
		s.b.NamedArgs([]any{sql.Named("p", string(p)), sql.Named("since", since)})...)
	if err != nil {
		return MirrorChanges{}, fmt.Errorf("mirror state: %w", err)
	}
	defer rows.Close()
	out := MirrorChanges{Changed: map[string]FileState{}}
	for rows.Next() {
		var kind int
		var st FileState
		if err := rows.Scan(&kind, &st.Stem, &st.Size, &st.MTime, &st.Hash, &st.ID, &st.CTime, &st.FileID); err != nil {
			return MirrorChanges{}, fmt.Errorf("mirror state: %w", err)
		}
		switch kind {
		case 0:
			out.Changed[st.Stem] = st
		case 1:
			out.Gone = append(out.Gone, st.Stem)
		case 2:
			out.Version = st.Size
		}
	}
	if err := rows.Err(); err != nil {
		return MirrorChanges{}, fmt.Errorf("mirror state: %w", err)
	}
	return out, nil
}

// MirrorVersion returns a number that changes whenever project p's mirror
// state does, in any process; a caller holding the state from MirrorState
// at the same version can reuse it.
func (s *Store) MirrorVersion(ctx context.Context, p scope.Identity) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT version FROM mirror_versions WHERE project = $1`, string(p)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}
