// Package sqlite is the embedded store: one SQLite file shared by every
// server process on the machine. It opens the file (private, 0600), sets
// the connection's pragmas, runs the migrations embedded here, begins write
// transactions with BEGIN IMMEDIATE, and copies and checks the file. It
// implements memory.Backend with the standard library's types, so it does
// not import memory; memory.New takes what Open returns.
//
// It imports the standard library, golang.org/x/sys and
// github.com/mattn/go-sqlite3, which no other package imports (but tests).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DB is an open SQLite database file.
type DB struct {
	db   *sql.DB
	path string
	cp   *checkpoints
}

// Open opens (creating if needed) the database at path and runs any
// pending migrations. The directory is created 0700 and the file 0600, and
// an existing one is made so (see tighten). It fails, changing nothing, on
// a file that is not a SQLite database or was made by a newer schema; the
// error says what the user can do.
func Open(ctx context.Context, path string) (*DB, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create database directory %s: %w", dir, describeOpenError(err))
	}
	if err := tighten(dir, path); err != nil {
		return nil, err
	}
	if err := create(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, describeOpenError(err))
	}
	// A URI: escape what would end or change its path (#, ?, %).
	dsn := "file:" + strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path) + "?_busy_timeout=10000&_txlock=immediate&_synchronous=NORMAL&_foreign_keys=1&_stmt_cache_size=64&_secure_delete=on"
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	d := &DB{db: db, path: path}
	if err := d.setup(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, describeOpenError(err))
	}
	d.cp = startCheckpoints(db)
	return d, nil
}

// Name returns "sqlite".
func (d *DB) Name() string { return "sqlite" }

// Path returns the database file's path.
func (d *DB) Path() string { return d.path }

// DB returns the pool.
func (d *DB) DB() *sql.DB { return d.db }

// Close stops the checkpoints and closes the pool; the last connection
// to close checkpoints what is left.
func (d *DB) Close() error {
	d.cp.stop()
	return d.db.Close()
}

// BeginWrite begins an immediate transaction (the DSN's _txlock): it takes
// SQLite's write lock at BEGIN, waiting out the busy timeout for it.
func (d *DB) BeginWrite(ctx context.Context) (*sql.Tx, func(commit bool) error, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	return tx, func(commit bool) error {
		if commit {
			err := tx.Commit()
			if err == nil {
				d.cp.committed()
			}
			return err
		}
		if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
			return err
		}
		return nil
	}, nil
}

// NamedArgs returns args: the driver binds sql.NamedArg values to @name
// parameters itself.
func (d *DB) NamedArgs(args []any) []any { return args }

// Retryable reports whether err is the database being busy or locked by
// another connection past the busy timeout.
func (d *DB) Retryable(err error) bool { return isBusy(err) }

// Uncertain reports false: a commit to a local file either happens or
// fails.
func (d *DB) Uncertain(error) bool { return false }

// Clock returns now: the machine has one clock.
func (d *DB) Clock(_ context.Context, now int64) (int64, error) { return now, nil }

// Schema returns the file's schema version.
func (d *DB) Schema(ctx context.Context) (int, error) {
	var v int
	err := d.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v)
	return v, err
}

// Size returns the bytes of the file and its write-ahead log.
func (d *DB) Size(context.Context) (int64, error) {
	var n int64
	for _, f := range []string{d.path, d.path + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n, nil
}

// tighten makes an existing database private again where an older tool, a
// copy or an umask left it open: the files become 0600 and the default
// directory (~/.prometheus, which is the store's own) 0700. A directory of
// the user's choosing is theirs to set (group-writable is common where
// each user has a group of their own), but one that every user may write
// to, without the sticky bit that protects /tmp, would let anyone replace
// the database, so it is refused with what to do.
func tighten(dir, path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("database directory %s: %w", dir, err)
	}
	if m := fi.Mode(); m.Perm()&0o077 != 0 {
		switch {
		case filepath.Base(dir) == ".prometheus":
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("database directory %s is open to others (mode %04o) and could not be made private: %w; run chmod 700 %s", dir, m.Perm(), err, dir)
			}
		case m.Perm()&0o002 != 0 && m&os.ModeSticky == 0:
			return fmt.Errorf("database directory %s may be written by anyone (mode %04o), who could replace the database; run chmod 700 %s, %s", dir, m.Perm(), dir, elsewhere)
		}
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(f)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(f, 0o600); err != nil {
			return fmt.Errorf("database file %s is open to others (mode %04o) and could not be made private: %w; run chmod 600 %s", f, fi.Mode().Perm(), err, f)
		}
	}
	return nil
}

// createMu makes creating a database file and SQLite's first open of it
// one step for this process: see create.
var createMu sync.Mutex

// create makes the database file, if it does not exist, so its mode is
// 0600 whatever the umask (SQLite gives the -wal and -shm files the same
// mode). An existing file is never opened here: closing any descriptor of
// a file drops every POSIX lock this process holds on it, and another
// Store's connections hold SQLite's.
func create(path string) error {
	createMu.Lock()
	defer createMu.Unlock()
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	} else if err == nil {
		return writable(path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if _, serr := os.Stat(path); !errors.Is(serr, fs.ErrNotExist) {
			return writable(path) // another process made it meanwhile
		}
		// A symlink to a file yet to be made, which O_EXCL will not
		// follow: make the file it names, or SQLite would, readable by
		// others under the usual umask. Nothing holds a lock on a file
		// that did not exist.
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// setup turns on WAL and migrates. Several processes may do this at the same
// moment: journal_mode is retried while another holds the lock, and each
// migration runs in an immediate transaction that re-reads the version.
func (d *DB) setup(ctx context.Context) error {
	var mode string
	var err error
	for i := 0; i < 50; i++ {
		err = d.db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		if err == nil || !isBusy(err) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return describeOpenError(err)
	}
	return d.migrate(ctx)
}

// SchemaVersion is the number of migrations this build knows.
func SchemaVersion() int {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	return len(names)
}

func migrationNames() []string {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	return names
}

func (d *DB) migrate(ctx context.Context) error {
	names := migrationNames()
	return d.migrateTo(ctx, names, len(names))
}

// migrateTo brings the schema to version target in one immediate
// transaction: every pending migration and the new version commit
// together or not at all. A fresh database is made in one commit, not one
// per migration; an old one is upgraded the same way. The version is read
// inside the transaction, so a process that migrated meanwhile leaves
// nothing to do.
func (d *DB) migrateTo(ctx context.Context, names []string, target int) error {
	// Nearly every open finds the schema current: look without the write
	// lock first.
	var v int
	if err := d.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return describeOpenError(err)
	}
	if v == target && target == len(names) {
		return nil
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return describeOpenError(err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return describeOpenError(err)
	}
	if v > len(names) {
		return fmt.Errorf("schema version %d is newer than this build knows (%d): upgrade memory-mcp", v, len(names))
	}
	if v >= target {
		return nil
	}
	for ; v < target; v++ {
		body, err := migrations.ReadFile(names[v])
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", filepath.Base(names[v]), err)
		}
	}
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(target)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate to version %d: %w", target, err)
	}
	return nil
}

func isBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// advised is a failure to open the database with what the user can do
// about it.
type advised struct {
	err    error
	advice string
}

func (a *advised) Error() string { return a.err.Error() + ": " + a.advice }
func (a *advised) Unwrap() error { return a.err }

// describeOpenError adds to err, when it knows the cause, what the user can
// do about it. It adds nothing to an error it described already.
func describeOpenError(err error) error {
	var a *advised
	if errors.As(err, &a) {
		return err
	}
	if advice := openAdvice(err); advice != "" {
		return &advised{err: err, advice: advice}
	}
	return err
}

const elsewhere = "or point PROMETHEUS_MEMORY_DB_PATH elsewhere"

func openAdvice(err error) string {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrNotADB, sqlite3.ErrCorrupt:
			return "the file is not a usable memory database; move it aside (it is left untouched) " + elsewhere
		case sqlite3.ErrFull:
			return errnoAdvice(syscall.ENOSPC)
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			return "another process has kept the database locked for over 10 seconds; try again, or find and stop that process"
		case sqlite3.ErrReadonly, sqlite3.ErrPerm, sqlite3.ErrCantOpen, sqlite3.ErrIoErr, sqlite3.ErrAuth:
			if a := errnoAdvice(se.SystemErrno); a != "" {
				return a
			}
			return "check that the file and its directory are writable, " + elsewhere
		}
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errnoAdvice(errno)
	}
	return ""
}

// errnoAdvice says what to do about a system error met opening the
// database, or "" when it has nothing useful to say.
func errnoAdvice(e syscall.Errno) string {
	switch e {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return "the disk is full, or a quota or file-size limit was reached; free some space (or raise the limit) and start again"
	case syscall.EROFS:
		return "the file system is read-only; point PROMETHEUS_MEMORY_DB_PATH at a writable place"
	case syscall.ENOTDIR:
		return "something on the way to the database is a file, not a directory; move that file " + elsewhere
	case syscall.EISDIR:
		return "PROMETHEUS_MEMORY_DB_PATH must name a file, not a directory (for example memory.db inside it)"
	case syscall.EACCES, syscall.EPERM:
		return "make the database file and its directory yours and writable (chmod u+rw the file, u+rwx the directory) " + elsewhere
	case syscall.ELOOP:
		return "the path goes through a symlink loop; fix the links " + elsewhere
	case syscall.ENAMETOOLONG:
		return "the path is too long for this system; choose a shorter PROMETHEUS_MEMORY_DB_PATH"
	}
	return ""
}

// escapePath makes path safe inside a file: URI.
func escapePath(path string) string {
	return (&url.URL{Path: path}).EscapedPath()
}
