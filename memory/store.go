package memory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"prom.codes/memory-mcp/scope"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store keeps records in one SQLite database shared by every server process
// on the machine, or in one PostgreSQL database shared by the replicas of a
// team server (see postgres.go). It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string // the file, or the URL without its password
	pg   bool   // PostgreSQL rather than SQLite (see postgres.go)
	now  func() time.Time

	// writing admits one write transaction of this process at a time.
	// SQLite would serialize them anyway, but a writer that finds the
	// lock taken sleeps in the busy handler for a millisecond or more;
	// waiting here wakes it the moment the other commits. Other
	// processes still meet the busy timeout.
	writing chan struct{}
	// fileUndo takes back the mirror's file operations of the write
	// transaction under way (there is one at a time) if it does not
	// commit. See undoFiles.
	fileUndo []func()
	// afterCommit, when set (by tests), runs right after a write
	// transaction commits, before anything the Store does about it.
	afterCommit func()

	idMu   sync.Mutex
	lastID [16]byte

	countMu sync.Mutex
	counts  map[countKey]count // see Count

	search searchIndex // see Search

	vectors     vectorIndex // see SemanticSearch
	embedWanted atomic.Bool // the database queues records for embedding (see wantEmbeddings)
	uses        touches     // see touch.go
}

// Options adjust how a Store is opened.
type Options struct {
	// Now is the clock; nil means time.Now. Tests inject their own.
	Now func() time.Time
}

// DefaultPath is where the database lives when PROMETHEUS_MEMORY_DB_PATH is
// not set: ~/.prometheus/memory.db.
func DefaultPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("home directory: %w", err)
	}
	return filepath.Join(home, ".prometheus", "memory.db"), nil
}

// Open opens (creating if needed) the database at path, runs any pending
// migrations and purges expired records. A path that is a postgres:// or
// postgresql:// URL (see IsURL) opens that PostgreSQL database instead,
// migrating it under an advisory lock, so replicas may start together. The directory is created 0700 and
// the file 0600, and an existing one is made so (see tighten). It fails,
// changing nothing, on a file that is not a SQLite database or was made by
// a newer schema.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if IsURL(path) {
		s, err := openPostgres(ctx, path, now)
		if err != nil {
			return nil, err
		}
		if _, err := s.Purge(ctx); err != nil {
			s.db.Close()
			return nil, fmt.Errorf("open database %s: %w", s.path, err)
		}
		return s, nil
	}
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
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s := &Store{db: db, path: path, now: now, writing: make(chan struct{}, 1)}
	if err := s.setup(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, describeOpenError(err))
	}
	if _, err := s.Purge(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, describeOpenError(err))
	}
	return s, nil
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

// Path returns the database file's path, or the PostgreSQL URL without
// its password.
func (s *Store) Path() string { return s.path }

// Close writes the uses not yet written (see Flush) and closes the
// database.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ferr := s.Flush(ctx)
	s.uses.mu.Lock()
	s.uses.closed = true
	if s.uses.timer != nil {
		s.uses.timer.Stop()
		s.uses.timer = nil
	}
	s.uses.mu.Unlock()
	if err := s.db.Close(); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("write uses: %w", ferr)
	}
	return nil
}

// setup turns on WAL and migrates. Several processes may do this at the same
// moment: journal_mode is retried while another holds the lock, and each
// migration runs in an immediate transaction that re-reads the version.
func (s *Store) setup(ctx context.Context) error {
	var mode string
	var err error
	for i := 0; i < 50; i++ {
		err = s.db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		if err == nil || !isBusy(err) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return describeOpenError(err)
	}
	return s.migrate(ctx)
}

// SchemaVersion is the number of migrations this build knows.
func SchemaVersion() int {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	return len(names)
}

func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	return s.migrateTo(ctx, names, len(names))
}

// migrateTo brings the schema to version target in one immediate
// transaction: every pending migration and the new version commit
// together or not at all. A fresh database is made in one commit, not one
// per migration; an old one is upgraded the same way. The version is read
// inside the transaction, so a process that migrated meanwhile leaves
// nothing to do.
func (s *Store) migrateTo(ctx context.Context, names []string, target int) error {
	// Nearly every open finds the schema current: look without the write
	// lock first.
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return describeOpenError(err)
	}
	if v == target && target == len(names) {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
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

// newID returns a ULID: 48 bits of milliseconds and 80 random bits, in
// Crockford base32, monotonic within one process.
func (s *Store) newID() string {
	var b [16]byte
	ms := uint64(s.now().UnixMilli())
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	s.idMu.Lock()
	if string(b[:6]) == string(s.lastID[:6]) {
		// Same millisecond: count up from the last id so ids sort by creation.
		b = s.lastID
		for i := 15; i >= 6; i-- {
			b[i]++
			if b[i] != 0 {
				break
			}
		}
	}
	s.lastID = b
	s.idMu.Unlock()
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Purge deletes records whose expiry has passed and reports how many. It
// leaves mirrored project records, whose markdown files must go with them:
// PurgeMirrored deletes those, file and all, for the project whose files it
// can reach. Reads hide all of them the moment they expire.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	const expired = `expires_at IS NOT NULL AND expires_at <= ? AND NOT (scope = 0 AND type IN ('semantic', 'procedural'))`
	now, err := s.purgeTime(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	// Most opens find nothing to purge: look before taking the write lock.
	var any bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM records WHERE `+expired+`)`, now).Scan(&any); err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	if !any {
		return 0, nil
	}
	var n int64
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM records WHERE `+expired, now)
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// PurgeMirrored deletes project p's expired facts and procedures and their
// markdown files, and reports how many.
func (s *Store) PurgeMirrored(ctx context.Context, p Project) (int, error) {
	now, err := s.purgeTime(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	var any bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM records WHERE project = ? AND scope = 0
		AND type IN ('semantic', 'procedural') AND expires_at IS NOT NULL AND expires_at <= ?)`, string(p.ID), now).Scan(&any); err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	if !any {
		return 0, nil
	}
	var n int
	err = s.tx(ctx, func(tx *sql.Tx) error {
		recs, err := queryRecords(ctx, tx, `SELECT `+cols+` FROM records r WHERE r.project = ? AND r.scope = 0
			AND r.type IN ('semantic', 'procedural') AND r.expires_at IS NOT NULL AND r.expires_at <= ?`, string(p.ID), now)
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		for _, r := range recs {
			if err := s.remove(ctx, tx, p, r, true); errors.Is(err, ErrConflict) {
				// Its file was edited by hand since: keep both; a sync
				// imports the edit, which brings the record back.
				continue
			} else if err != nil {
				return fmt.Errorf("purge %s: %w", r.Key, err)
			}
			n++
		}
		return nil
	})
	return n, err
}

func nanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := time.Unix(0, n.Int64).UTC()
	return &t
}

// bucket is the partition a record of level l lives in (see Bucket).
func bucket(p string, scopeLevel int) string {
	return Bucket(scope.Identity(p), scope.Level(scopeLevel))
}

// joinKeys is for error messages listing several types.
func joinTypes(ts []Type) string {
	ss := make([]string, len(ts))
	for i, t := range ts {
		ss[i] = string(t)
	}
	return strings.Join(ss, ", ")
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
