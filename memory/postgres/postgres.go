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
	"bytes"
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
	"time"
	"unicode/utf8"

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

// pgText reports whether PostgreSQL's TEXT can hold s: valid UTF-8
// without NUL bytes.
func pgText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
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
//   - translated statements (pgTranslate): SQL text only, no data;
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
	path string // the URL without its password
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
	db := sql.OpenDB(&pgConnector{inner: stdlib.GetConnector(*cfg), name: name})
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &DB{db: db, path: name}
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

// pgSchemaVersion is the number of PostgreSQL migrations this build knows.
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
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c := dc.(*pgConn).inner.Conn()
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

// pgConnector dials through pgx's database/sql driver, retrying with
// backoff while the server is unreachable (a restart, a failover) for as
// long as the caller's context allows, up to connectPatience.
type pgConnector struct {
	inner driver.Connector
	name  string // the URL without its password
}

const connectPatience = 10 * time.Second

func (c *pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	deadline := time.Now().Add(connectPatience)
	wait := 25 * time.Millisecond
	for {
		dc, err := c.inner.Connect(ctx)
		if err == nil {
			return &pgConn{connector: c, inner: dc.(*stdlib.Conn)}, nil
		}
		if !connLost(err) || time.Now().Add(wait).After(deadline) {
			return nil, pgConnectError(c.name, err)
		}
		select {
		case <-ctx.Done():
			return nil, pgConnectError(c.name, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func (c *pgConnector) Driver() driver.Driver { return c.inner.Driver() }

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
// rather than an answer from the server: the statement may be retried on
// another connection if it is safe to.
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

// pgRetryable reports whether a write transaction that failed with err may
// run again: it did not commit (a failed commit is never retried, since it
// may have committed), and the failure was the connection or a conflict
// PostgreSQL asks to retry.
func pgRetryable(err error) bool {
	var cu *commitUnknown
	if errors.As(err, &cu) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
		return true
	}
	return connLost(err)
}

// uncertain reports whether err is a commit whose outcome is unknown.
func uncertain(err error) bool {
	var cu *commitUnknown
	return errors.As(err, &cu)
}

// commitUnknown is a commit that failed in a way that leaves its outcome
// unknown to this process.
type commitUnknown struct{ err error }

func (e *commitUnknown) Error() string {
	return "commit: the connection was lost, the write may or may not have been saved: " + e.err.Error()
}
func (e *commitUnknown) Unwrap() error { return e.err }

// pgConn is one connection of pgx's driver that takes the store's SQLite
// statements (see pgTranslate) and its write lock.
type pgConn struct {
	connector *pgConnector
	inner     *stdlib.Conn
	inTx      bool
}

// pgRetries is how many times a statement that is safe to run again (a
// read, a write that never reached its commit, a BEGIN) is retried on a
// new connection, after 25, 50, 100 and 200 ms, when the connection is
// lost. database/sql then tries other connections of its pool, and a
// new one, which the connector dials with its own backoff.
const pgRetries = 4

// reconnect replaces c's lost connection with a new one, after a backoff
// that grows with attempt.
func (c *pgConn) reconnect(ctx context.Context, attempt int) error {
	c.inner.Close()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(25<<attempt) * time.Millisecond):
	}
	dc, err := c.connector.inner.Connect(ctx)
	if err != nil {
		return err
	}
	c.inner = dc.(*stdlib.Conn)
	return nil
}

// retry runs op until it succeeds, fails otherwise than by losing the
// connection, or has been retried pgRetries times; op must be safe to run
// again after a lost connection. It returns driver.ErrBadConn when the
// connection stays lost, so database/sql carries on with another.
func (c *pgConn) retry(ctx context.Context, op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil || c.inTx || !connLost(err) {
			return err
		}
		var cu *commitUnknown
		if errors.As(err, &cu) {
			return err
		}
		if attempt == pgRetries {
			return driver.ErrBadConn
		}
		if err := c.reconnect(ctx, attempt); err != nil {
			if connLost(err) {
				return driver.ErrBadConn
			}
			return err
		}
	}
}

var (
	_ driver.ConnBeginTx        = (*pgConn)(nil)
	_ driver.ConnPrepareContext = (*pgConn)(nil)
	_ driver.ExecerContext      = (*pgConn)(nil)
	_ driver.QueryerContext     = (*pgConn)(nil)
	_ driver.Pinger             = (*pgConn)(nil)
	_ driver.SessionResetter    = (*pgConn)(nil)
	_ driver.NamedValueChecker  = (*pgConn)(nil)
)

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext only translates: pgx prepares and caches each statement
// on each connection as it first runs there.
func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	q, err := pgTranslate(query)
	if err != nil {
		return nil, err
	}
	return &pgStmt{c: c, q: q}, nil
}

func (c *pgConn) Close() error { return c.inner.Close() }

func (c *pgConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx begins a transaction. A read-only one reads one snapshot
// (REPEATABLE READ), as a SQLite read transaction does; any other takes
// the write lock in the same round trip as BEGIN, before its first
// statement, so that every statement of it sees every write committed
// before, as SQLite's immediate transactions do.
func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var tx driver.Tx
	err := c.retry(ctx, func() (err error) {
		tx, err = c.begin(ctx, opts)
		return err
	})
	return tx, err
}

// pgBegin begins a write transaction: BEGIN, the write lock, and the
// transaction's id, kept so that a commit whose answer is lost can be
// looked up (see pgTx.Commit), all in one round trip.
var pgBegin = "BEGIN; SELECT pg_advisory_xact_lock(" + strconv.Itoa(pgWriteLock) + "); SELECT txid_current()"

func (c *pgConn) begin(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	pc := c.inner.Conn()
	if pc.IsClosed() {
		return nil, driver.ErrBadConn
	}
	if opts.ReadOnly {
		tx, err := pc.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			if connLost(err) {
				return nil, driver.ErrBadConn
			}
			return nil, fmt.Errorf("begin: %w", err)
		}
		c.inTx = true
		return &pgTx{c: c, tx: tx, ctx: ctx}, nil
	}
	res, err := pc.PgConn().Exec(ctx, pgBegin).ReadAll()
	if err == nil && (len(res) != 3 || len(res[2].Rows) != 1 || len(res[2].Rows[0]) != 1) {
		err = errors.New("unexpected answer to BEGIN")
	}
	var xid int64
	if err == nil {
		xid, err = strconv.ParseInt(string(res[2].Rows[0][0]), 10, 64)
	}
	if err != nil {
		if !pc.IsClosed() && pc.PgConn().TxStatus() != 'I' {
			pc.PgConn().Exec(context.WithoutCancel(ctx), "ROLLBACK").ReadAll()
		}
		if connLost(err) {
			return nil, driver.ErrBadConn
		}
		return nil, fmt.Errorf("begin: %w", err)
	}
	c.inTx = true
	return &pgTx{c: c, xid: xid, ctx: ctx}, nil
}

// pgTx is a transaction: a read-only one of pgx's, or a write one begun
// by pgBegin, with its id.
type pgTx struct {
	c   *pgConn
	tx  pgx.Tx // a read-only transaction; nil for a write one
	xid int64
	ctx context.Context
}

// Commit commits. When the COMMIT's answer does not arrive (the connection
// lost, the context ended), whether it committed is looked up on another
// connection: committed is success, so an acknowledged write is never
// reported failed and done again by the caller; not committed is the
// error, which may be retried; unknown (the server unreachable) is
// commitUnknown, never retried.
func (t *pgTx) Commit() error {
	t.c.inTx = false
	if t.tx != nil {
		return t.tx.Commit(t.ctx)
	}
	res, err := t.c.inner.Conn().PgConn().Exec(t.ctx, "COMMIT").ReadAll()
	if err == nil {
		if len(res) == 1 && res[0].CommandTag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !connLost(err) {
		return err // the server answered: nothing was committed
	}
	// Lost, or the server's process ended (terminated, shut down) while
	// committing: it may have committed.
	switch t.c.outcome(t.ctx, t.xid, connectPatience) {
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

func (t *pgTx) Rollback() error {
	t.c.inTx = false
	if t.tx != nil {
		return t.tx.Rollback(t.ctx)
	}
	pc := t.c.inner.Conn()
	if pc.IsClosed() {
		// Lost in the middle: the server's process may not know yet, and
		// would keep the write lock from every writer until it does.
		t.c.outcome(t.ctx, t.xid, 2*time.Second)
		return nil
	}
	if pc.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := pc.PgConn().Exec(context.WithoutCancel(t.ctx), "ROLLBACK").ReadAll()
	return err
}

// outcome looks up, on a new connection, whether the transaction xid of
// c's lost connection committed: "committed", "aborted", or "" when it
// cannot tell within patience. A transaction still in progress belongs to a server
// process that has not noticed its client is gone, and holds the write
// lock meanwhile: it is ended (a role may end its own processes), which
// settles the outcome either way.
func (c *pgConn) outcome(ctx context.Context, xid int64, patience time.Duration) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), patience)
	defer cancel()
	pid := c.inner.Conn().PgConn().PID()
	dc, err := c.connector.Connect(ctx)
	if err != nil {
		return ""
	}
	defer dc.Close()
	pc := dc.(*pgConn).inner.Conn()
	wait := 10 * time.Millisecond
	for i := 0; ; i++ {
		var st *string
		if err := pc.QueryRow(ctx, `SELECT txid_status($1)`, xid).Scan(&st); err != nil || st == nil {
			return ""
		}
		if *st != "in progress" {
			return *st
		}
		if i == 5 {
			pc.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
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

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	q, err := pgTranslate(query)
	if err != nil {
		return nil, err
	}
	return c.exec(ctx, q, args)
}

func (c *pgConn) exec(ctx context.Context, q *pgQuery, args []driver.NamedValue) (driver.Result, error) {
	args, err := q.bind(args)
	if err != nil {
		return nil, err
	}
	if c.inTx {
		return c.inner.ExecContext(ctx, q.sql, args)
	}
	var res driver.Result
	err = c.retry(ctx, func() (err error) {
		if q.write {
			res, err = c.writeOnce(ctx, q, args)
		} else {
			res, err = c.inner.ExecContext(ctx, q.sql, args)
		}
		return err
	})
	return res, err
}

// writeOnce runs a write on its own in a transaction of its own, under
// the write lock. A lost connection before the commit is sent leaves
// nothing done, so it may be run again; a commit whose answer is lost is
// commitUnknown, never run again.
func (c *pgConn) writeOnce(ctx context.Context, q *pgQuery, args []driver.NamedValue) (driver.Result, error) {
	tx, err := c.begin(ctx, driver.TxOptions{})
	if err != nil {
		return nil, err
	}
	res, err := c.inner.ExecContext(ctx, q.sql, args)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, err := pgTranslate(query)
	if err != nil {
		return nil, err
	}
	return c.query(ctx, q, args)
}

func (c *pgConn) query(ctx context.Context, q *pgQuery, args []driver.NamedValue) (driver.Rows, error) {
	args, err := q.bind(args)
	if err != nil {
		return nil, err
	}
	if c.inTx {
		return c.inner.QueryContext(ctx, q.sql, args)
	}
	if q.write {
		return nil, fmt.Errorf("a statement that writes and returns rows must run in a transaction")
	}
	// A read on its own: safe to run again on a new connection. Its rows
	// are read here, so that a connection lost halfway through them is
	// retried too.
	var rows *bufferedRows
	err = c.retry(ctx, func() (err error) {
		rows, err = c.readAll(ctx, q, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (c *pgConn) readAll(ctx context.Context, q *pgQuery, args []driver.NamedValue) (*bufferedRows, error) {
	rows, err := c.inner.QueryContext(ctx, q.sql, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := &bufferedRows{cols: rows.Columns()}
	for {
		row := make([]driver.Value, len(b.cols))
		err := rows.Next(row)
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		for i, v := range row {
			if bs, ok := v.([]byte); ok {
				row[i] = bytes.Clone(bs)
			}
		}
		b.rows = append(b.rows, row)
	}
}

// bufferedRows are the rows of a read, read in full.
type bufferedRows struct {
	cols []string
	rows [][]driver.Value
}

func (b *bufferedRows) Columns() []string { return b.cols }
func (b *bufferedRows) Close() error      { b.rows = nil; return nil }

func (b *bufferedRows) Next(dest []driver.Value) error {
	if len(b.rows) == 0 {
		return io.EOF
	}
	copy(dest, b.rows[0])
	b.rows = b.rows[1:]
	return nil
}

func (c *pgConn) Ping(ctx context.Context) error { return c.inner.Ping(ctx) }

func (c *pgConn) ResetSession(ctx context.Context) error {
	c.inTx = false
	return c.inner.ResetSession(ctx)
}

func (c *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	// Values of named types (scope.Level, Type) go in as their kind, as
	// database/sql would convert them without a checker; pgx takes the
	// rest (Valuers among them) as they are.
	if _, ok := nv.Value.(driver.Valuer); !ok {
		if v, err := driver.DefaultParameterConverter.ConvertValue(nv.Value); err == nil {
			nv.Value = v
		}
	}
	// PostgreSQL's TEXT holds neither NUL nor invalid UTF-8, where SQLite
	// takes any bytes: say so plainly rather than pass on the server's
	// encoding error. The store refuses such input before it gets here;
	// this is for what slips past.
	if v, ok := nv.Value.(string); ok && !pgText(v) {
		return errors.New("a value holds a NUL byte or invalid UTF-8, which PostgreSQL cannot store")
	}
	// bool goes in as 0 or 1: the schema keeps SQLite's integer flags.
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(0)
		if b {
			nv.Value = int64(1)
		}
	}
	return nil
}

// bind puts args in the order of q's parameters.
func (q *pgQuery) bind(args []driver.NamedValue) ([]driver.NamedValue, error) {
	if q.names == nil {
		for i := range args {
			if args[i].Name != "" {
				return nil, fmt.Errorf("named argument @%s for a statement with positional parameters", args[i].Name)
			}
		}
		return args, nil
	}
	out := make([]driver.NamedValue, len(q.names))
	for i, name := range q.names {
		found := false
		for _, a := range args {
			if a.Name == name {
				out[i] = driver.NamedValue{Ordinal: i + 1, Value: a.Value}
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("missing argument @%s", name)
		}
	}
	return out, nil
}

type pgStmt struct {
	c *pgConn
	q *pgQuery
}

func (s *pgStmt) Close() error  { return nil }
func (s *pgStmt) NumInput() int { return -1 }

func (s *pgStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("Stmt.Exec is not supported: use ExecContext")
}

func (s *pgStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("Stmt.Query is not supported: use QueryContext")
}

func (s *pgStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.exec(ctx, s.q, args)
}

func (s *pgStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.query(ctx, s.q, args)
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

// BeginWrite begins a write transaction, which takes the write lock.
func (s *DB) BeginWrite(ctx context.Context) (*sql.Tx, func() error, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	return tx, tx.Commit, nil
}

// Retryable reports whether a write transaction that failed with err may
// run again (see pgRetryable).
func (s *DB) Retryable(err error) bool { return pgRetryable(err) }

// Uncertain reports whether err is a commit whose outcome is unknown.
func (s *DB) Uncertain(err error) bool { return uncertain(err) }

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
func (s *DB) Restore(_ context.Context, src string, _ func(done, total int)) error {
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
