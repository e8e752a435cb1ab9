// Package postgres is the team store: one PostgreSQL database shared by
// the replicas of a team server. It connects through
// github.com/jackc/pgx/v5, runs the migrations embedded here under an
// advisory lock, makes writers take turns with a second one, and replaces
// lost connections. It implements memory.Backend with the standard
// library's types, so it does not import memory; memory.New takes what
// Open returns.
//
// It imports the standard library and pgx, which no other package imports
// (but tests).
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed migrations/*.sql
var pgMigrations embed.FS

// unsupported is errors.ErrUnsupported for what, with what to use
// instead.
func unsupported(what, instead string) error {
	return fmt.Errorf("%s: %w on PostgreSQL; %s", what, errors.ErrUnsupported, instead)
}

// redact returns a URL without its password, for messages.
func redact(target string) string {
	u, err := url.Parse(target)
	if err != nil || strings.Contains(u.Fragment, "@") {
		// A fragment holding @ is the rest of a password holding # and
		// @ unescaped: what parsed as the host is part of it.
		return "postgres://(unparsable URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	// password, sslpassword (the client key's): any parameter naming one.
	// A query that does not parse whole (a ';' between parameters) is not
	// shown: what it holds is unknown.
	u.Fragment, u.RawFragment = "", ""
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		u.RawQuery = "(unparsable)"
		return u.String()
	}
	hidden := false
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
			hidden = true
		}
	}
	if hidden {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// What each process keeps in memory, and how it sees other processes'
// writes. On SQLite other processes are the other servers on the machine;
// on PostgreSQL they are the other replicas, and nothing changes: every
// cache below checks the database on each call, with one indexed read, so
// a write committed by any replica is seen by the next read of every other.
// Polling per call rather than LISTEN/NOTIFY keeps one code path for both
// backends and needs no connection held open per replica; the reads are of
// a primary key's maximum or a one-row table.
//
//   - the search index (searchindex.go): max(seq) of changes before each
//     search, then the rows past the last seq applied;
//   - the vector index (vecindex.go): the same over embed_changes;
//   - counts (Count): the generation row, bumped by the records triggers;
//   - the mirror state (MirrorChangesSince, MirrorVersion): the project's
//     row in mirror_versions, and the rows whose v is past it;
//   - saved instructions (Cached): keyed by the max(seq) of the project's
//     buckets, so text derived before any replica's change is not returned;
//   - uses (touch.go): a process's own reads, counted in memory and written
//     with its next write or within a second, as on SQLite; until then other
//     replicas see the count without them.
//
// The change sequences work only if a replica that has read seq N never
// later meets a change below N; the write lock below sees to that.

// The write lock. PostgreSQL lets write transactions run side by side, but
// the store's change sequences (changes.seq, embed_changes.seq, the mirror
// versions) are read by other replicas as "everything up to N is here": a
// transaction that took seq 7 and committed before one holding seq 6 would
// let a replica catch up to 7 and never see 6. So every write transaction
// takes this advisory lock first, as SQLite's one writer at a time does,
// and sequences commit in the order they are given. The lock goes with
// the transaction (pg_advisory_xact_lock), so a connection lost mid-write
// releases it.
const (
	pgWriteLock   = 0x6d656d6f7279 // "memory"
	pgMigrateLock = 0x6d6967726174 // "migrat"
)

// pgIdleInTx is how long the server lets a store's transaction sit idle.
const pgIdleInTx = "1min"

// DB is an open PostgreSQL database.
type DB struct {
	db   *sql.DB
	cfg  *pgx.ConnConfig
	path string // the URL without its password
	// lost is when a connection was last found lost, in Unix
	// nanoseconds (see noteLost).
	lost atomic.Int64
}

// Open opens the database at target, a postgres:// or postgresql:// URL,
// and migrates it under an advisory lock, so replicas may start together.
// An error never shows the URL's password.
func Open(ctx context.Context, target string) (*DB, error) {
	name := redact(target)
	// A scheme is case-insensitive; pgx takes it in lower case only, and
	// would read POSTGRES://… as a list of key=value settings.
	if i := strings.Index(target, "://"); i > 0 {
		target = strings.ToLower(target[:i]) + target[i:]
	}
	cfg, err := pgx.ParseConfig(target)
	if err != nil {
		// pgx's message may quote the URL: keep only its kind.
		return nil, fmt.Errorf("open database %s: the URL does not parse", name)
	}
	// A replica that stops in the middle of a write (a frozen machine, a
	// network gone quiet) leaves its server process in the transaction,
	// holding the write lock from every other replica; the server ends
	// such a transaction after this long idle. The store's own are never
	// idle for more than the moments between statements. A URL may set
	// its own.
	if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = pgIdleInTx
	}
	s := &DB{cfg: cfg, path: name}
	// A FATAL error from the server (its process terminated, the server
	// shutting down) ends the connection, as pgx's own handler does, and
	// may have ended the others with it.
	cfg.OnPgError = func(_ *pgconn.PgConn, pe *pgconn.PgError) bool {
		if strings.EqualFold(pe.Severity, "FATAL") {
			s.noteLost()
			return false
		}
		return true
	}
	// database/sql replaces a connection that fails its check before
	// reuse. pgx checks one idle for over a second; every one used last
	// before a connection was found lost is checked too.
	s.db = stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(func(_ context.Context, p stdlib.ShouldPingParams) bool {
		return p.IdleDuration > time.Second || time.Now().Add(-p.IdleDuration).UnixNano() <= s.lost.Load()
	}))
	db := s.db
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := s.migrate(ctx); err != nil {
		db.Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return nil, &advised{err: fmt.Errorf("open database %s: %w", name, err),
				advice: "the role needs CREATE on the schema it migrates: GRANT CREATE ON SCHEMA to it, or give it a schema of its own (CREATE SCHEMA … AUTHORIZATION) and name it with ?search_path= in the URL"}
		}
		if errors.As(err, &pe) && pe.Code == "3F000" {
			return nil, &advised{err: fmt.Errorf("open database %s: %w", name, err),
				advice: "the schema the URL's search_path names does not exist: create it (CREATE SCHEMA … AUTHORIZATION the role) or name another"}
		}
		return nil, fmt.Errorf("open database %s: %w", name, err)
	}
	return s, nil
}

// pgMigrationNames are the PostgreSQL migrations this build knows, in order.
func pgMigrationNames() ([]string, error) {
	names, err := fs.Glob(pgMigrations, "migrations/*.sql")
	sort.Strings(names)
	return names, err
}

// migratePostgres applies the pending migrations, each in a transaction
// with its version, under a session advisory lock, so replicas starting
// together migrate once: the others wait, then find nothing to do. The
// versions applied are rows of memory_migrations (a name of its own, so
// as not to meet another tool's schema_migrations in a shared database).
func (s *DB) migrate(ctx context.Context) error {
	names, err := pgMigrationNames()
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return pgConnectError(s.path, err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(pgMigrateLock)); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(pgMigrateLock))
		if _, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS memory_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var v int
		if err := c.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM memory_migrations`).Scan(&v); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if v > len(names) {
			return fmt.Errorf("schema version %d is newer than this build knows (%d): upgrade memory-mcp", v, len(names))
		}
		for ; v < len(names); v++ {
			body, err := pgMigrations.ReadFile(names[v])
			if err != nil {
				return err
			}
			tx, err := c.Begin(ctx)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				tx.Rollback(ctx)
				return fmt.Errorf("migration postgres/%s: %w", names[v][strings.LastIndexByte(names[v], '/')+1:], err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO memory_migrations (version, applied_at) VALUES ($1, $2)`, v+1, time.Now().UnixNano()); err != nil {
				tx.Rollback(ctx)
				return fmt.Errorf("migrate: %w", err)
			}
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v+1, err)
			}
		}
		return nil
	})
}

// pgConnectError is err, met connecting to the database name, with what to
// do about it where the cause is a common one.
func pgConnectError(name string, err error) error {
	err = scrub(err)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000":
			return &advised{err: fmt.Errorf("connect to %s: %w", name, err), advice: "check the user and password in the URL (or in ~/.pgpass)"}
		case "3D000":
			return &advised{err: fmt.Errorf("connect to %s: %w", name, err), advice: "create the database first (createdb, or CREATE DATABASE)"}
		case "42501":
			return &advised{err: fmt.Errorf("connect to %s: %w", name, err), advice: "grant the user CONNECT on the database"}
		}
	}
	if connLost(err) {
		return &advised{err: fmt.Errorf("connect to %s: %w", name, err), advice: "the PostgreSQL server did not answer; check that it runs and that the host and port in the URL are right"}
	}
	return fmt.Errorf("connect to %s: %w", name, err)
}

// scrub drops what a connection error may say of the URL: pgx's message
// names the host and user, never the password, but says so in a form that
// repeats the configuration; keep its cause.
func scrub(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap()
	}
	return err
}

// connLost reports whether err is the loss (or absence) of the connection
// rather than an answer from the server.
func connLost(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: the server shut
		// down, was terminated, or cannot take connections yet.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	return pgconn.SafeToRetry(err)
}

// commitUnknown is a commit that failed in a way that leaves its outcome
// unknown to this process.
type commitUnknown struct{ err error }

func (e *commitUnknown) Error() string {
	return "commit: the connection was lost, the write may or may not have been saved: " + e.err.Error()
}
func (e *commitUnknown) Unwrap() error { return e.err }

// noteLost records that a connection was found lost: the pool's other
// connections may be gone with it (a restart, a failover, a network
// reset), so each is checked before its next use, and one that does not
// answer is replaced (see Open).
func (s *DB) noteLost() { s.lost.Store(time.Now().UnixNano()) }

// writeLock is what a write transaction runs first: the write lock, and the
// transaction's id and server process, kept so that a commit whose answer
// is lost can be looked up (see write.end). It goes by the simple protocol,
// in one round trip.
var writeLock = "SELECT txid_current(), pg_backend_pid() FROM (SELECT pg_advisory_xact_lock(" + strconv.Itoa(pgWriteLock) + ")) AS l"

// BeginWrite begins a write transaction, which takes the write lock before
// its first statement, so that it sees every write committed before, as
// SQLite's immediate transactions do.
func (s *DB) BeginWrite(ctx context.Context) (*sql.Tx, func(commit bool) error, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	w := &write{s: s, tx: tx, ctx: ctx}
	if err := tx.QueryRowContext(ctx, writeLock, pgx.QueryExecModeSimpleProtocol).Scan(&w.xid, &w.pid); err != nil {
		w.end(false)
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return tx, w.end, nil
}

// write is a write transaction under way.
type write struct {
	s    *DB
	tx   *sql.Tx
	ctx  context.Context
	xid  int64
	pid  int64
	done bool
}

// end commits or rolls back. When the COMMIT's answer does not arrive (the
// connection lost, the server's process ended), whether it committed is
// looked up on a new connection: committed is success, so an acknowledged
// write is never reported failed and done again by the caller; not
// committed is the error, which may be retried; unknown (the server
// unreachable) is commitUnknown, never retried. A rollback on a lost
// connection ends the server's side of the transaction, which would hold
// the write lock from every writer until the server noticed.
func (w *write) end(commit bool) error {
	if w.done {
		return nil
	}
	w.done = true
	if !commit {
		err := w.tx.Rollback()
		if err != nil && !errors.Is(err, sql.ErrTxDone) && w.xid != 0 {
			w.s.outcome(w.ctx, w.xid, w.pid, 2*time.Second)
		}
		return err
	}
	err := w.tx.Commit()
	if err == nil || errors.Is(err, pgx.ErrTxCommitRollback) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !connLost(err) {
		return err // the server answered: nothing was committed
	}
	w.s.noteLost()
	switch w.s.outcome(w.ctx, w.xid, w.pid, connectPatience) {
	case "committed":
		return nil
	case "aborted":
		if connLost(err) {
			return err
		}
		return fmt.Errorf("commit: %w (the write was not saved)", err)
	}
	return &commitUnknown{err: err}
}

// connectPatience is how long a commit's outcome is looked for while the
// server is unreachable.
const connectPatience = 10 * time.Second

// outcome looks up, on a new connection, whether the transaction xid of the
// server process pid committed: "committed", "aborted", or "" when it
// cannot tell within patience. A transaction still in progress belongs to
// a server process that has not noticed its client is gone, and holds the
// write lock meanwhile: it is ended (a role may end its own processes),
// which settles the outcome either way.
func (s *DB) outcome(ctx context.Context, xid, pid int64, patience time.Duration) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), patience)
	defer cancel()
	var c *pgx.Conn
	for wait := 25 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var err error
		if c, err = pgx.ConnectConfig(ctx, s.cfg); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(wait):
		}
	}
	defer c.Close(context.WithoutCancel(ctx))
	wait := 10 * time.Millisecond
	for i := 0; ; i++ {
		var st *string
		if err := c.QueryRow(ctx, `SELECT txid_status($1)`, xid).Scan(&st); err != nil || st == nil {
			return ""
		}
		if *st != "in progress" {
			return *st
		}
		if i == 5 {
			c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE pid = $1 AND backend_xid::text = ($2 % 4294967296)::text`, pid, xid)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// NamedArgs returns args, sql.NamedArg values for @name parameters, as
// pgx's named arguments, which pgx puts in $n order.
func (s *DB) NamedArgs(args []any) []any {
	named := pgx.NamedArgs{}
	for _, a := range args {
		n := a.(sql.NamedArg)
		named[n.Name] = n.Value
	}
	return []any{named}
}

// Clock returns now, or the database server's clock when that is earlier.
// Replicas share the database but not a clock; one whose clock runs ahead
// would otherwise delete, for every replica, records that have not
// expired yet. (A slow clock only purges late; reads hide what expired by
// each replica's own clock either way.)
func (s *DB) Clock(ctx context.Context, now int64) (int64, error) {
	var server int64
	if err := s.db.QueryRowContext(ctx, `SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT) * 1000`).Scan(&server); err != nil {
		return 0, err
	}
	return min(now, server), nil
}

// Name returns "postgres".
func (s *DB) Name() string { return "postgres" }

// Path returns the URL without its password.
func (s *DB) Path() string { return s.path }

// DB returns the pool.
func (s *DB) DB() *sql.DB { return s.db }

// Close closes the pool.
func (s *DB) Close() error { return s.db.Close() }

// Retryable reports whether a write transaction or a read that failed
// with err may run again: it did not commit (a failed commit is never
// retried, since it may have committed), and the failure was the
// connection or a conflict PostgreSQL asks to retry.
func (s *DB) Retryable(err error) bool {
	var cu *commitUnknown
	if errors.As(err, &cu) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
		return true
	}
	if connLost(err) {
		s.noteLost()
		return true
	}
	return false
}

// Uncertain reports whether err is a commit whose outcome is unknown.
func (s *DB) Uncertain(err error) bool {
	var cu *commitUnknown
	return errors.As(err, &cu)
}

// Schema returns the number of migrations applied.
func (s *DB) Schema(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM memory_migrations`).Scan(&v)
	return v, err
}

// Size returns the bytes the database takes on the server.
func (s *DB) Size(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}

// Backup is refused: the server has its own tools.
func (s *DB) Backup(_ context.Context, dst string) error {
	return unsupported("backup to "+dst, "back up a PostgreSQL database with pg_dump or the server's own backups")
}

// Restore is refused: the server has its own tools.
func (s *DB) Restore(_ context.Context, src, _ string, _ func(done, total int)) error {
	return unsupported("restore "+src, "restore a PostgreSQL database with pg_restore or the server's own recovery")
}

// advised is a failure to open the database with what the user can do
// about it.
type advised struct {
	err    error
	advice string
}

func (a *advised) Error() string { return a.err.Error() + ": " + a.advice }
func (a *advised) Unwrap() error { return a.err }

// Exec runs one statement on the server at url on a connection of its
// own, outside any store: for tools that make and drop databases (CREATE
// DATABASE cannot run in a transaction). Errors are the server's, with the
// URL's password never in them.
func Exec(ctx context.Context, url, stmt string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return scrub(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return scrub(err)
}
