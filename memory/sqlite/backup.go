package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Backup writes a consistent copy of the database to dst, which must not
// exist, while other processes go on writing: VACUUM INTO reads one
// snapshot, so the copy holds every write committed before it began. The
// copy is made 0600.
func (d *DB) Backup(ctx context.Context, dst string) error {
	return backupTo(ctx, d.db, dst)
}

// backupTo is Backup through q: the pool, or one connection of it.
func backupTo(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, dst string) error {
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
	if _, err := q.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
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

// withPageSize opens src read-only if its pages are want bytes, else a
// copy of it made with pages of that size, removed by done.
func withPageSize(ctx context.Context, src string, want int) (*sql.DB, func(), error) {
	db, err := sql.Open("sqlite3", "file:"+escapePath(src)+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return nil, nil, err
	}
	var have int
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&have); err != nil || have == want {
		return db, func() { db.Close() }, err
	}
	defer db.Close()
	dir, err := os.MkdirTemp("", "memory-mcp-restore-")
	if err != nil {
		return nil, nil, err
	}
	conv := filepath.Join(dir, "pages.db")
	if err := backupTo(ctx, db, conv); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	c, err := sql.Open("sqlite3", "file:"+escapePath(conv)+"?_busy_timeout=10000")
	if err == nil {
		_, err = c.ExecContext(ctx, fmt.Sprintf(`PRAGMA journal_mode = DELETE; PRAGMA page_size = %d; VACUUM`, want))
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return c, func() { c.Close(); os.RemoveAll(dir) }, nil
}

// keepQuiet copies the database to keep through c while another
// connection holds the write lock, and again if a commit came between,
// a few times at most.
func (d *DB) keepQuiet(ctx context.Context, c *sql.Conn, keep string) error {
	version := func() (v int64, err error) {
		err = c.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
		return v, err
	}
	lock, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer lock.Close()
	for try := 0; ; try++ {
		before, err := version()
		if err != nil {
			return err
		}
		if _, err := lock.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			return err
		}
		err = backupTo(ctx, c, keep)
		if _, rerr := lock.ExecContext(ctx, `ROLLBACK`); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		after, err := version()
		if err != nil || after == before {
			return err
		}
		if try == 4 {
			os.Remove(keep)
			return errors.New("other processes kept writing while it was copied; try again when they are quieter")
		}
		os.Remove(keep)
	}
}

// Restore replaces the database's content with the database at src, after
// checking src with CheckFile and keeping a copy of what it replaces at
// keep. It uses SQLite's online backup, so servers that have the database
// open see the restored content on their next read rather than a file
// swapped under them. Migrations then bring an older schema up to date.
//
// Other processes may go on writing. A write committed after the kept
// copy was taken and before the restore began would be in neither. So the
// copy is taken while another connection holds the write lock, and again
// if anything was committed between its start and the moment that lock
// is let go (PRAGMA data_version); the restore follows at once, in one
// step, itself holding the write lock throughout.
func (d *DB) Restore(ctx context.Context, src, keep string, progress func(done, total int)) error {
	if _, err := CheckFile(ctx, src); err != nil {
		return err
	}
	abs1, _ := filepath.Abs(src)
	abs2, _ := filepath.Abs(d.path)
	if abs1 == abs2 {
		return fmt.Errorf("restore %s: that is the database itself", src)
	}
	// SQLite's backup into a database in WAL mode needs pages of its size;
	// a file from a build that made larger ones is copied to that first.
	var want int
	if err := d.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&want); err != nil {
		return fmt.Errorf("restore %s: %w", src, err)
	}
	from, done, err := withPageSize(ctx, src, want)
	if err != nil {
		return fmt.Errorf("restore %s: %w", src, describeOpenError(err))
	}
	defer done()
	fc, err := from.Conn(ctx)
	if err != nil {
		return fmt.Errorf("restore %s: %w", src, err)
	}
	defer fc.Close()
	tc, err := d.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("restore %s: %w", src, err)
	}
	defer tc.Close()
	if err := d.keepQuiet(ctx, tc, keep); err != nil {
		return fmt.Errorf("keep the replaced database: %w", err)
	}
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
			if _, err := b.Step(-1); err != nil {
				b.Finish()
				return err
			}
			if progress != nil {
				progress(b.PageCount(), b.PageCount())
			}
			return b.Finish()
		})
	})
	if err != nil {
		os.Remove(keep) // nothing was replaced
		return fmt.Errorf("restore %s: %w", src, describeOpenError(err))
	}
	if err := d.migrate(ctx); err != nil {
		return fmt.Errorf("restore %s: %w", src, err)
	}
	return nil
}
