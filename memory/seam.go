package memory

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory/excerpt"
	"prom.codes/memory-mcp/scope"
)

// What the packages over memory that keep tables of their own need of
// the Store: memory/semantic (the embed_* tables: the embedding queue and
// the vectors, and search by meaning) and memory/token (the tokens table).
// They get the pool, the write transaction, the clock, and the records a
// caller sees. Their statements write their own tables only.

// DB returns the pool the store's statements run on.
func (s *Store) DB() *sql.DB { return s.db }

// Now returns the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// WriteTx runs fn in a write transaction, as every write of the store
// does, and again when it failed in a way that may be retried (see
// Backend.Retryable).
func (s *Store) WriteTx(ctx context.Context, fn func(*sql.Tx) error) error { return s.tx(ctx, fn) }

// Retry runs read again when it failed for a connection lost on the way,
// which the pool replaces, up to twice.
func Retry[T any](ctx context.Context, s *Store, read func() (T, error)) (T, error) {
	return retry(ctx, s, read)
}

// Visible is the condition that p sees a record, on the records table
// aliased r, and the arguments of a statement holding it, with more
// (sql.NamedArg values) of the statement's own.
func (s *Store) Visible(p scope.Identity, more ...any) (string, []any) {
	return visible, s.b.NamedArgs(s.args(p, more...))
}

// VisibleBuckets are the buckets (see Bucket) whose records p may see,
// and the narrowest level p sees in the global one, "".
func VisibleBuckets(p scope.Identity) ([]string, scope.Level) {
	return visibleBuckets(p), globalFrom(p)
}

// Found reads the records of ids (rowids) that p sees as effective
// (visible, not expired and not shadowed by a narrower record of the same
// name), as hits keyed by rowid: each with its preview for opts.Query,
// without its body unless opts.Bodies, and no score. opts's filters are
// not applied.
func (s *Store) Found(ctx context.Context, p scope.Identity, opts SearchOptions, ids []int64) (map[int64]Hit, error) {
	out := map[int64]Hit{}
	if len(ids) == 0 {
		return out, nil
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	terms, words := excerpt.Analyze(opts.Query)
	// The rowids go in as one argument, not in the text: one statement,
	// prepared once per connection, rather than one per set of rowids.
	rows, err := s.db.QueryContext(ctx, `SELECT r.rowid, r.project, `+cols+` FROM records r WHERE `+s.inIDs("r.rowid", "@ids")+` AND `+effective,
		s.b.NamedArgs(append(s.args(p), sql.Named("ids", "["+strings.Join(list, ",")+"]")))...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var project string
		r, err := scanRecord(withRowid{rows, &id, &project})
		if err != nil {
			return nil, err
		}
		h := Hit{Record: r, Preview: preview(r, terms, words)}
		if !opts.Bodies {
			h.Record.Body = ""
		}
		out[id] = h
	}
	return out, rows.Err()
}

// What memory/team and memory/teamsync need besides: writing and reading
// one record by its full name inside a write transaction of WriteTx, so a
// change applied and the sync state that goes with it commit together.

// PutTx is Put inside tx, a transaction of WriteTx. A put that fails
// changes nothing, and tx goes on.
func (s *Store) PutTx(ctx context.Context, tx *sql.Tx, p Project, w Write) (Record, bool, error) {
	if err := validate(&w); err != nil {
		return Record{}, false, err
	}
	return s.put(ctx, tx, p, w, "")
}

// Named reads the record of level l, type t and key in bucket b (see
// Bucket), expired or not, inside tx. Errors: ErrNotFound.
func (s *Store) Named(ctx context.Context, tx *sql.Tx, b string, l scope.Level, t Type, key string) (Record, error) {
	return getOne(ctx, tx, `WHERE project = $1 AND scope = $2 AND type = $3 AND key = $4`, b, int(l), string(t), key)
}

// DeleteTx deletes the record of level l, type t and key that p writes,
// inside tx, and returns it. Errors: ErrNotFound; CodeInvalidArgument when
// p may not write l.
func (s *Store) DeleteTx(ctx context.Context, tx *sql.Tx, p Project, l scope.Level, t Type, key string) (Record, error) {
	if err := p.writable(l); err != nil {
		return Record{}, err
	}
	rec, err := s.Named(ctx, tx, bucket(string(p.ID), int(l)), l, t, key)
	if err != nil {
		return Record{}, err
	}
	return rec, s.remove(ctx, tx, p, rec, true)
}
