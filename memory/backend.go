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
	// this process or another, commits until it ends. end(true) commits
	// it; an error that leaves the outcome unknown is one Uncertain
	// reports. end(false) rolls it back, and does nothing once it has
	// ended.
	BeginWrite(ctx context.Context) (tx *sql.Tx, end func(commit bool) error, err error)
	// NamedArgs returns the arguments of a statement with @name
	// parameters, given as sql.NamedArg values, as DB takes them.
	NamedArgs(args []any) []any
	// Retryable reports whether a write transaction or a read that
	// failed with err did not commit and may run again (the database
	// was busy, or the connection was lost before the commit).
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
	// after checking it and keeping a copy of the content it replaces at
	// keep (a file that must not exist), and migrates it. progress, when
	// not nil, is told the pages copied and the pages in all.
	Restore(ctx context.Context, src, keep string, progress func(done, total int)) error
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

// retry runs read again when it failed for a connection lost on the way,
// which the pool replaces (see Backend.Retryable), up to twice.
func retry[T any](ctx context.Context, s *Store, read func() (T, error)) (T, error) {
	v, err := read()
	for i := 0; i < 2 && err != nil && ctx.Err() == nil && s.b.Retryable(err); i++ {
		v, err = read()
	}
	return v, err
}

// What the store's statements spell differently on the two backends.
// Everything else is written once, in the SQL both accept, with $1, $2, …
// numbered in the order they first appear (SQLite numbers them so, and
// takes the arguments in that order) or with @name parameters whose
// arguments go through Backend.NamedArgs.

// indexedBy names the index SQLite's planner is to use; PostgreSQL's
// planner picks its own.
func (s *Store) indexedBy(index string) string {
	if s.pg {
		return ""
	}
	return " INDEXED BY " + index
}

// greatest is the greater of a and b.
func (s *Store) greatest(a, b string) string {
	if s.pg {
		return "greatest(" + a + ", " + b + ")"
	}
	return "max(" + a + ", " + b + ")"
}

// jsonValues is a table of the elements of the JSON array expr, in a
// column named value, called json_each.
func (s *Store) jsonValues(expr string) string {
	if s.pg {
		return "jsonb_array_elements_text(CAST(" + expr + " AS jsonb)) AS json_each(value)"
	}
	return "json_each(" + expr + ")"
}

// usesRows is a table u of the uses in param, a JSON array of
// [id, n, at] triples, in columns id, n and at.
func (s *Store) usesRows(param string) string {
	if s.pg {
		return "(SELECT e->>0 AS id, CAST(e->>1 AS BIGINT) AS n, CAST(e->>2 AS BIGINT) AS at FROM jsonb_array_elements(CAST(" + param + " AS jsonb)) AS e) AS u"
	}
	return "(SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS n, json_extract(value, '$[2]') AS at FROM json_each(" + param + ")) AS u"
}

// inIDs holds where col is one of the ids in param, a JSON array. On
// PostgreSQL it is a comparison with an array, which the plan kept for a
// prepared statement reads by the primary key (a join with the array's
// rows would scan the table).
func (s *Store) inIDs(col, param string) string {
	if s.pg {
		return col + " = ANY (CAST(ARRAY(SELECT jsonb_array_elements_text(CAST(" + param + " AS jsonb))) AS BIGINT[]))"
	}
	return col + " IN (SELECT value FROM json_each(" + param + "))"
}
