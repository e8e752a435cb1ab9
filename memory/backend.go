package memory

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"unicode/utf8"
)

// Backend is the database a Store keeps its records in: a SQLite file
// (memory/sqlite) or a PostgreSQL database shared by the replicas of a
// team server (memory/postgres). The Store's statements are this
// package's, written in the SQL both accept, and run on DB; a Backend
// does what the two do differently: opening and migrating, taking the
// write lock, telling which failures may be retried, copying and checking
// the database. Its methods use the standard library's types only, so an
// adapter need not import this package.
type Backend interface {
	// Name is "sqlite" or "postgres".
	Name() string
	// Path is the database file, or the URL without its password.
	Path() string
	// DB is the pool the Store's statements run on.
	DB() *sql.DB
	// BeginWrite begins a write transaction. It sees every write
	// committed before it began, and no other write transaction, of
	// this process or another, commits until it ends. commit ends it;
	// an error from commit that leaves the outcome unknown is one
	// Uncertain reports.
	BeginWrite(ctx context.Context) (tx *sql.Tx, commit func() error, err error)
	// Retryable reports whether a write transaction that failed with
	// err did not commit and may run again (the database was busy or
	// the connection was lost before the commit).
	Retryable(err error) bool
	// Uncertain reports whether err is a commit whose outcome is
	// unknown: it may have committed, and must not be run again.
	Uncertain(err error) bool
	// Clock returns the time, in Unix nanoseconds, before which expired
	// records may be deleted: now, or the database server's clock when
	// that is earlier (replicas share the database but not a clock).
	Clock(ctx context.Context, now int64) (int64, error)
	// Schema is the schema version of the database.
	Schema(ctx context.Context) (int, error)
	// Size is the bytes the database takes.
	Size(ctx context.Context) (int64, error)
	// Backup writes a consistent copy of the database to dst, a file
	// that must not exist.
	Backup(ctx context.Context, dst string) error
	// Restore replaces the database's content with the database at src,
	// after checking it, and migrates it. progress, when not nil, is
	// told the pages copied and the pages in all.
	Restore(ctx context.Context, src string, progress func(done, total int)) error
	// Close closes the pool.
	Close() error
}

// ErrUnsupported is returned for what a backend cannot do (copy or check
// a PostgreSQL database); the error wrapping it says what to use instead.
var ErrUnsupported = errors.ErrUnsupported

// IsURL reports whether target names a PostgreSQL database (a postgres://
// or postgresql:// URL) rather than a SQLite file.
func IsURL(target string) bool {
	t := strings.ToLower(target)
	return strings.HasPrefix(t, "postgres://") || strings.HasPrefix(t, "postgresql://")
}

// Backend returns the name of the store's backend: "sqlite" or "postgres".
func (s *Store) Backend() string { return s.b.Name() }

// storableText reports whether either backend can hold s: PostgreSQL's
// TEXT takes valid UTF-8 without NUL bytes only. A lookup by a value that
// is not finds nothing, on either backend alike.
func storableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// storable refuses, on PostgreSQL, values that reached the store without
// a check of their own (a cache name, a project's root on a file system
// that allows any bytes) and that its TEXT cannot hold.
func (s *Store) storable(vs ...string) error {
	for _, v := range vs {
		if s.pg && !storableText(v) {
			return Errorf(CodeInvalidArgument, "", "a value holds a NUL byte or invalid UTF-8, which PostgreSQL cannot store")
		}
	}
	return nil
}
