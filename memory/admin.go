package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"

	"prom.codes/memory-mcp/scope"
)

// NoteRoot records that project p lives at root and was used now, so that
// projects can be listed with their roots and moved.
func (s *Store) NoteRoot(ctx context.Context, p scope.Identity, root string) error {
	if err := s.storable(root); err != nil {
		return fmt.Errorf("note project root: %w", err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO project_roots (project, root, last_used) VALUES ($1, $2, $3)
			ON CONFLICT (project) DO UPDATE SET root = excluded.root, last_used = excluded.last_used`,
			string(p), root, s.now().UnixNano())
		if err != nil {
			return fmt.Errorf("note project root: %w", err)
		}
		return nil
	})
}

// ProjectInfo is one project the database holds records for or has seen.
type ProjectInfo struct {
	ID       scope.Identity `json:"id"`
	Root     string         `json:"root,omitempty"` // "" when no server recorded it
	Records  int            `json:"records"`
	LastUsed *time.Time     `json:"last_used,omitempty"`
}

// Projects lists every project with records or a recorded root, most
// recently used first.
func (s *Store) Projects(ctx context.Context) ([]ProjectInfo, error) {
	now := s.now().UnixNano()
	latest := "coalesce((SELECT " + s.greatest("max(r.updated_at)", "coalesce(max(r.last_accessed_at), 0)") + " FROM records r WHERE r.project = ids.project), 0)"
	rows, err := s.db.QueryContext(ctx, `
		WITH ids AS (SELECT DISTINCT project FROM records WHERE project <> '' UNION SELECT project FROM project_roots)
		SELECT ids.project, coalesce(pr.root, ''),
			(SELECT count(*) FROM records r WHERE r.project = ids.project AND (r.expires_at IS NULL OR r.expires_at > $1)),
			`+s.greatest("coalesce(pr.last_used, 0)", latest)+`
		FROM ids LEFT JOIN project_roots pr ON pr.project = ids.project`, now)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	defer rows.Close()
	var out []ProjectInfo
	for rows.Next() {
		var p ProjectInfo
		var last int64
		if err := rows.Scan(&p.ID, &p.Root, &p.Records, &last); err != nil {
			return nil, fmt.Errorf("list projects: %w", err)
		}
		if last > 0 {
			t := time.Unix(0, last).UTC()
			p.LastUsed = &t
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].LastUsed, out[j].LastUsed
		if (a == nil) != (b == nil) {
			return a != nil
		}
		if a != nil && !a.Equal(*b) {
			return a.After(*b)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// MoveProject carries every record and piece of state of the project at
// from to the project at to (a moved or re-cloned checkout), keeping ids,
// and reports how many records moved. A server that already ran at the new
// root has imported the checkout's markdown files as copies of the moving
// records; those copies give way to the records they copy. Errors:
// ErrNotFound when from has nothing; CodeConflict when to holds a record
// of its own with the same type and key as one moving, so nothing is
// merged by accident.
func (s *Store) MoveProject(ctx context.Context, from, to scope.Identity, toRoot string) (int, error) {
	if from == to {
		return 0, Errorf(CodeInvalidArgument, "root", "the old and new roots are the same project")
	}
	var n int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var have, known int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM records WHERE project = $1`, string(from)).Scan(&have); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM project_roots WHERE project = $1`, string(from)).Scan(&known); err != nil {
			return err
		}
		if have == 0 && known == 0 {
			return Errorf(CodeNotFound, "", "no project has that root in the database (see memory-mcp projects)")
		}
		const clash = `FROM records t JOIN records f ON f.project = @from AND f.scope = t.scope AND f.type = t.type AND f.key = t.key WHERE t.project = @to`
		args := []any{sql.Named("from", string(from)), sql.Named("to", string(to))}
		var own int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) `+clash+` AND t.source <> 'markdown'`, s.b.NamedArgs(args)...).Scan(&own); err != nil {
			return err
		}
		if own > 0 {
			return Errorf(CodeConflict, "", "the new root already has %d records of its own with the keys of records moving; remove them (memory-mcp rm) or export them first", own)
		}
		// The copies made from the checkout's files go, with their state:
		// the moving records and their file state take their place.
		if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE rowid IN (SELECT t.rowid `+clash+`)`, s.b.NamedArgs(args)...); err != nil {
			return fmt.Errorf("move: %w", err)
		}
		steps := []string{
			`DELETE FROM mirror_files WHERE project = @to AND stem IN (SELECT stem FROM mirror_files WHERE project = @from)`,
			`UPDATE mirror_files SET project = @to WHERE project = @from`,
			`UPDATE statement_sessions SET project = @to WHERE project = @from AND NOT EXISTS (SELECT 1 FROM statement_sessions o
				WHERE o.project = @to AND o.statement = statement_sessions.statement AND o.session_id = statement_sessions.session_id)`,
			`DELETE FROM statement_sessions WHERE project = @from`,
			`UPDATE procedure_sessions SET project = @to WHERE project = @from AND NOT EXISTS (SELECT 1 FROM procedure_sessions o
				WHERE o.project = @to AND o.key = procedure_sessions.key AND o.session_id = procedure_sessions.session_id)`,
			`DELETE FROM procedure_sessions WHERE project = @from`,
			// Cached text is derived; both projects' go stale.
			`DELETE FROM cache WHERE project IN (@from, @to)`,
			// The version only ever grows, so a server watching it sees
			// the change.
			`INSERT INTO mirror_versions (project, version) SELECT @to, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = @to)`,
			`UPDATE mirror_versions SET version = 1 + (SELECT max(version) FROM mirror_versions WHERE project IN (@from, @to)) WHERE project = @to`,
		}
		for _, q := range steps {
			if _, err := tx.ExecContext(ctx, q, s.b.NamedArgs(args)...); err != nil {
				return fmt.Errorf("move: %w", err)
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE records SET project = @to WHERE project = @from`, s.b.NamedArgs(args)...)
		if err != nil {
			return fmt.Errorf("move records: %w", err)
		}
		m, _ := res.RowsAffected()
		n = int(m)
		if _, err := tx.ExecContext(ctx, `DELETE FROM project_roots WHERE project IN (@from, @to)`, s.b.NamedArgs(args)...); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO project_roots (project, root, last_used) VALUES (@to, @root, @now)`,
			s.b.NamedArgs(append(args, sql.Named("root", toRoot), sql.Named("now", s.now().UnixNano())))...)
		return err
	})
	return n, err
}

// Stats summarises the database.
type Stats struct {
	Path     string         `json:"path"`
	Bytes    int64          `json:"bytes"` // the file and its write-ahead log
	Records  int            `json:"records"`
	Counts   []Count        `json:"counts"`
	Projects int            `json:"projects"`
	Oldest   *time.Time     `json:"oldest,omitempty"`
	Newest   *time.Time     `json:"newest,omitempty"`
	Schema   int            `json:"schema_version"`
	ByScope  map[string]int `json:"by_scope"`
	ByType   map[string]int `json:"by_type"`
}

// Count is how many live records one scope and type hold.
type Count struct {
	Scope scope.Level `json:"scope"`
	Type  Type        `json:"type"`
	N     int         `json:"count"`
}

// Stats counts the live records of every project by scope and type and
// reports the database's size, schema and oldest and newest records.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Path: s.path, ByScope: map[string]int{}, ByType: map[string]int{}}
	now := s.now().UnixNano()
	rows, err := s.db.QueryContext(ctx, `SELECT scope, type, count(*) FROM records WHERE expires_at IS NULL OR expires_at > $1 GROUP BY scope, type ORDER BY scope, type`, now)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	for rows.Next() {
		var c Count
		var sc int
		var t string
		if err := rows.Scan(&sc, &t, &c.N); err != nil {
			rows.Close()
			return st, fmt.Errorf("stats: %w", err)
		}
		c.Scope, c.Type = scope.Level(sc), Type(t)
		st.Counts = append(st.Counts, c)
		st.Records += c.N
		st.ByScope[c.Scope.String()] += c.N
		st.ByType[t] += c.N
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	var oldest, newest sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT min(created_at), max(updated_at), count(DISTINCT nullif(project, '')) FROM records WHERE expires_at IS NULL OR expires_at > $1`, now).Scan(&oldest, &newest, &st.Projects)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	st.Oldest, st.Newest = fromNanos(oldest), fromNanos(newest)
	if st.Schema, err = s.b.Schema(ctx); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	if st.Bytes, err = s.b.Size(ctx); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// Export calls fn with every live record, of project p and the global
// bucket, or of every project when all is set, in a stable order: project,
// scope, type, key. The project of a project-scope record is passed beside
// it ("" for the others).
func (s *Store) Export(ctx context.Context, p scope.Identity, all bool, fn func(project string, r Record) error) error {
	where := `(r.expires_at IS NULL OR r.expires_at > $1) AND r.project IN ($2, '')`
	args := []any{s.now().UnixNano(), string(p)}
	if all {
		where = `(r.expires_at IS NULL OR r.expires_at > $1)`
		args = args[:1]
	}
	// One read transaction: a consistent picture while servers write.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT r.project, `+cols+` FROM records r WHERE `+where+` ORDER BY r.project, r.scope, r.type, r.key`, args...)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var proj string
		var rec Record
		var err error
		rec, err = scanRecord(prefixed{rows, &proj})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := fn(proj, rec); err != nil {
			return err
		}
	}
	return rows.Err()
}

// prefixed scans one extra leading column into dst before a record's.
type prefixed struct {
	row scanner
	dst *string
}

func (p prefixed) Scan(dest ...any) error { return p.row.Scan(append([]any{p.dst}, dest...)...) }

// Restore writes rec as it was exported: through the one write path (every
// field validated and scanned for secrets), keeping its id, times, use
// count, session and source; with no expiry it takes its type's default.
// A record with the same scope, type and key is replaced and keeps its own
// id. Errors as Put; CodeConflict when the id belongs to another record.
func (s *Store) Restore(ctx context.Context, p Project, rec Record) (Record, bool, error) {
	w := Write{
		Scope: rec.Scope, Type: rec.Type, Key: rec.Key, Description: rec.Description, Body: rec.Body,
		Tags: rec.Tags, Confidence: &rec.Confidence, SessionID: rec.SessionID, Source: rec.Source,
		Metadata: rec.Metadata, UseCount: &rec.UseCount,
	}
	// No expiry given means the type's default, as for any write: an
	// export always carries the expiry of a working or episodic record.
	if rec.ExpiresAt != nil {
		// An expired line would replace a live record of the same key,
		// which the next purge then deletes, file and all.
		if !rec.ExpiresAt.After(s.now()) {
			return Record{}, false, Errorf(CodeInvalidArgument, "expires_at", "is past: the record had expired, and was not imported over what is there now")
		}
		// Further out, the expiry would overflow into the past.
		if rec.ExpiresAt.After(s.now().Add(MaxTTL)) {
			return Record{}, false, Errorf(CodeInvalidArgument, "expires_at", "is more than 100 years away")
		}
		w.keepExpiry, w.expiresAt = true, rec.ExpiresAt
	}
	if w.Source == "" {
		w.Source = FromCLI
	}
	for _, t := range []struct {
		field string
		t     *time.Time
	}{{"created_at", &rec.CreatedAt}, {"updated_at", &rec.UpdatedAt}, {"last_accessed_at", rec.LastAccessedAt}} {
		if t.t != nil && !t.t.IsZero() && (t.t.Year() < 1970 || t.t.After(s.now().Add(MaxTTL))) {
			return Record{}, false, Errorf(CodeInvalidArgument, t.field, "is out of range (1970 to 100 years from now)")
		}
	}
	if err := validate(&w); err != nil {
		return Record{}, false, err
	}
	if err := ScanKey("id", rec.ID); err != nil {
		return Record{}, false, err
	}
	if rec.ID != "" && !idRE.MatchString(rec.ID) {
		return Record{}, false, Errorf(CodeInvalidArgument, "id", "is not an id (a ULID or UUID: letters, digits and '-', at most 64)")
	}
	var out Record
	var created bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if rec.ID != "" {
			var owner string
			err := tx.QueryRowContext(ctx, `SELECT key || ' (' || type || ')' FROM records WHERE id = $1 AND NOT (project = $2 AND scope = $3 AND type = $4 AND key = $5)`,
				rec.ID, bucket(string(p.ID), int(w.Scope)), int(w.Scope), string(w.Type), w.Key).Scan(&owner)
			if err == nil {
				return Errorf(CodeConflict, "id", "already belongs to another record, %s", owner)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		var err error
		out, created, err = s.put(ctx, tx, p, w, rec.ID)
		if err != nil {
			return err
		}
		if !created || rec.CreatedAt.IsZero() {
			return nil
		}
		// A new record takes the exported times, and its file says so.
		out.CreatedAt, out.LastAccessedAt = rec.CreatedAt.UTC(), rec.LastAccessedAt
		if !rec.UpdatedAt.IsZero() {
			out.UpdatedAt = rec.UpdatedAt.UTC()
		}
		if _, err := tx.ExecContext(ctx, `UPDATE records SET created_at = $1, updated_at = $2, last_accessed_at = $3 WHERE id = $4`,
			out.CreatedAt.UnixNano(), out.UpdatedAt.UnixNano(), nanos(out.LastAccessedAt), out.ID); err != nil {
			return err
		}
		return s.writeFile(ctx, tx, p, out, true)
	})
	return out, created, err
}

// idRE is what an imported id may look like: a ULID or a UUID, or
// another short opaque id.
var idRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z-]{0,63}$`)

// Check validates w as a write would, secrets included, without writing.
// It returns the error Put would.
func Check(w Write) error { return validate(&w) }

// Normalize is Check that also returns w as a write would store it: key
// lower-cased, body, description and tags in their canonical form.
func Normalize(w Write) (Write, error) {
	err := validate(&w)
	return w, err
}

// ReleaseMissingFiles forgets, for project p, the mirror's record of every
// file that gone reports missing, so that the next sync writes those files
// from the records again instead of taking their absence as a deletion.
// After a restore it brings back the files of records the backup holds;
// files still on disk stay canonical. It reports how many it released.
func (s *Store) ReleaseMissingFiles(ctx context.Context, p scope.Identity, gone func(stem string) bool) (int, error) {
	st, err := s.MirrorState(ctx, p)
	if err != nil {
		return 0, err
	}
	var stems []string
	for stem := range st {
		if gone(stem) {
			stems = append(stems, stem)
		}
	}
	if len(stems) == 0 {
		return 0, nil
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		for _, stem := range stems {
			if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_files WHERE project = $1 AND stem = $2`, string(p), stem); err != nil {
				return fmt.Errorf("release %s: %w", stem, err)
			}
		}
		return nil
	})
	return len(stems), err
}
