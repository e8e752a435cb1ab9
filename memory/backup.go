package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Backup writes a consistent copy of the database to dst, which must not
// exist, while other processes go on writing: VACUUM INTO reads one
// snapshot, so the copy holds every write committed before it began. The
// copy is made 0600.
func (s *Store) Backup(ctx context.Context, dst string) error {
	if s.pg {
		return unsupported("backup to "+dst, "back up a PostgreSQL database with pg_dump or the server's own backups")
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("backup to %s: the file exists; choose a new name or remove it", dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	// Create it first, empty and private, so the copy is never readable by
	// others, whatever the umask; VACUUM INTO accepts an empty file.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	f.Close()
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		os.Remove(dst)
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	return nil
}

// FileCheck is what CheckFile found in a database file.
type FileCheck struct {
	Path      string   `json:"path"`
	Integrity []string `json:"integrity"` // ["ok"] when sound
	Schema    int      `json:"schema_version"`
	Records   int      `json:"records"`
}

// OK reports whether the file passed the integrity check.
func (c FileCheck) OK() bool { return len(c.Integrity) == 1 && c.Integrity[0] == "ok" }

// CheckFile opens path read-only, changing nothing, and checks that it is a
// sound memory database this build can use: PRAGMA integrity_check, a
// schema version this build knows, and a records table. The error says what
// is wrong.
func CheckFile(ctx context.Context, path string) (FileCheck, error) {
	c := FileCheck{Path: path}
	fi, err := os.Stat(path)
	if err != nil {
		return c, fmt.Errorf("check %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return c, fmt.Errorf("check %s: not a regular file", path)
	}
	db, err := sql.Open("sqlite3", "file:"+escapePath(path)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return c, fmt.Errorf("check %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return c, fmt.Errorf("check %s: %w", path, describeOpenError(err))
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return c, fmt.Errorf("check %s: %w", path, err)
		}
		c.Integrity = append(c.Integrity, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("check %s: %w", path, describeOpenError(err))
	}
	if !c.OK() {
		return c, fmt.Errorf("check %s: integrity check failed: %s", path, strings.Join(first(c.Integrity, 3), "; "))
	}
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&c.Schema); err != nil {
		return c, fmt.Errorf("check %s: %w", path, err)
	}
	if c.Schema > SchemaVersion() {
		return c, fmt.Errorf("check %s: schema version %d is newer than this build knows (%d): upgrade memory-mcp", path, c.Schema, SchemaVersion())
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM records`).Scan(&c.Records); err != nil || c.Schema < 1 {
		return c, fmt.Errorf("check %s: not a memory database (no records table)", path)
	}
	return c, nil
}

func first(ss []string, n int) []string { return ss[:min(n, len(ss))] }

// escapePath makes path safe inside a file: URI.
func escapePath(path string) string {
	return (&url.URL{Path: path}).EscapedPath()
}

// RestoreFrom replaces the database's content with the database at src,
// after checking src with CheckFile, and first keeps a consistent copy of
// the replaced content at keep (which must not exist). It uses SQLite's
// online backup, so servers that have the database open see the restored
// content on their next read rather than a file swapped under them.
// Migrations then bring an older schema up to date.
//
// progress, when not nil, is told the pages copied and the pages in all as
// the copy goes.
func (s *Store) RestoreFrom(ctx context.Context, src, keep string, progress func(done, total int)) (FileCheck, error) {
	if s.pg {
		return FileCheck{Path: src}, unsupported("restore "+src, "restore a PostgreSQL database with pg_restore or the server's own recovery")
	}
	c, err := CheckFile(ctx, src)
	if err != nil {
		return c, err
	}
	abs1, _ := filepath.Abs(src)
	abs2, _ := filepath.Abs(s.path)
	if abs1 == abs2 {
		return c, fmt.Errorf("restore %s: that is the database itself", src)
	}
	before, err := s.changeMarks(ctx)
	if err != nil {
		return c, fmt.Errorf("restore %s: %w", src, err)
	}
	if err := s.Backup(ctx, keep); err != nil {
		return c, fmt.Errorf("keep the replaced database: %w", err)
	}
	from, err := sql.Open("sqlite3", "file:"+escapePath(src)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return c, fmt.Errorf("restore %s: %w", src, err)
	}
	defer from.Close()
	fc, err := from.Conn(ctx)
	if err != nil {
		return c, fmt.Errorf("restore %s: %w", src, err)
	}
	defer fc.Close()
	tc, err := s.db.Conn(ctx)
	if err != nil {
		return c, fmt.Errorf("restore %s: %w", src, err)
	}
	defer tc.Close()
	err = tc.Raw(func(to any) error {
		return fc.Raw(func(fr any) error {
			dst, ok1 := to.(*sqlite3.SQLiteConn)
			srcConn, ok2 := fr.(*sqlite3.SQLiteConn)
			if !ok1 || !ok2 {
				return errors.New("not a sqlite3 connection")
			}
			b, err := dst.Backup("main", srcConn, "main")
			if err != nil {
				return err
			}
			for {
				done, err := b.Step(256)
				if err != nil {
					b.Finish()
					return err
				}
				if progress != nil {
					total := b.PageCount()
					progress(total-b.Remaining(), total)
				}
				if done {
					break
				}
			}
			return b.Finish()
		})
	})
	if err != nil {
		return c, fmt.Errorf("restore %s: %w", src, describeOpenError(err))
	}
	if err := s.migrate(ctx); err != nil {
		return c, fmt.Errorf("restore %s: %w", src, err)
	}
	if err := s.markRestored(ctx, before); err != nil {
		return c, fmt.Errorf("restore %s: %w", src, err)
	}
	s.countMu.Lock()
	s.counts = nil
	s.countMu.Unlock()
	return c, nil
}

// marks are the change counters other processes compare against, as they
// stood before a restore, and the mirror's files then.
type marks struct {
	generation int64
	version    int64 // the highest mirror version of any project
	stems      map[[2]string]bool
	seq        int64                  // the highest search change
	searched   map[changeKey]struct{} // every record the search index may hold
	vectors    vectorMarks
}

// changeKey names a record as the search index's change sequence does.
type changeKey struct {
	project string
	rid     int64
}

func (s *Store) changeMarks(ctx context.Context) (marks, error) {
	m := marks{stems: map[[2]string]bool{}, searched: map[changeKey]struct{}{}}
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM changes`).Scan(&m.seq); err != nil {
		return m, err
	}
	crows, err := s.db.QueryContext(ctx, `SELECT project, rid FROM changes`)
	if err != nil {
		return m, err
	}
	for crows.Next() {
		var k changeKey
		if err := crows.Scan(&k.project, &k.rid); err != nil {
			crows.Close()
			return m, err
		}
		m.searched[k] = struct{}{}
	}
	crows.Close()
	if err := crows.Err(); err != nil {
		return m, err
	}
	if m.vectors, err = readVectorMarks(ctx, s.db); err != nil {
		return m, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce((SELECT n FROM generation WHERE id = 1), 0), coalesce((SELECT max(version) FROM mirror_versions), 0)`).Scan(&m.generation, &m.version); err != nil {
		return m, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT project, stem FROM mirror_files`)
	if err != nil {
		return m, err
	}
	defer rows.Close()
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return m, err
		}
		m.stems[k] = true
	}
	return m, rows.Err()
}

// markRestored moves every change counter past where it stood before the
// restore, so that a server that kept counts or mirror state from before
// reads them afresh: each file's row counts as changed, and each file the
// restore took away as gone.
func (s *Store) markRestored(ctx context.Context, before marks) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		steps := []string{
			`UPDATE generation SET n = n + @gen + 1 WHERE id = 1`,
			`UPDATE mirror_versions SET version = version + @v + 1`,
			`UPDATE mirror_files SET v = (SELECT version FROM mirror_versions m WHERE m.project = mirror_files.project)`,
		}
		for _, q := range steps {
			if _, err := tx.ExecContext(ctx, q, sql.Named("gen", before.generation), sql.Named("v", before.version)); err != nil {
				return err
			}
		}
		if err := restampChanges(ctx, tx, before); err != nil {
			return err
		}
		if err := restampVectorChanges(ctx, tx, before.vectors); err != nil {
			return err
		}
		for k := range before.stems {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mirror_files WHERE project = ? AND stem = ?`, k[0], k[1]).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO mirror_versions (project, version) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = ?)`, k[0], before.version+1, k[0]); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO mirror_gone (project, stem, v) SELECT ?, ?, version FROM mirror_versions WHERE project = ?
				ON CONFLICT (project, stem) DO UPDATE SET v = excluded.v`, k[0], k[1], k[0]); err != nil {
				return err
			}
		}
		return nil
	})
}

// restampChanges gives every record the search index of a running server
// may hold, from before the restore or after it, a change past the last
// one such an index applied, so that it drops what the restore took away
// and reads what it brought back.
func restampChanges(ctx context.Context, tx *sql.Tx, before marks) error {
	keys := before.searched
	rows, err := tx.QueryContext(ctx, `SELECT project, rowid FROM records`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k changeKey
		if err := rows.Scan(&k.project, &k.rid); err != nil {
			rows.Close()
			return err
		}
		keys[k] = struct{}{}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var after int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM changes`).Scan(&after); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM changes`); err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO changes (seq, project, rid) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	seq := max(before.seq, after)
	for k := range keys {
		seq++
		if _, err := ins.ExecContext(ctx, seq, k.project, k.rid); err != nil {
			return err
		}
	}
	return nil
}
