package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"prom.codes/memory-mcp/scope"
)

// CacheStamp is the state of project p's records as the cache sees it: it
// moves with every insert, delete and change of a key, description, body,
// tag or expiry in any bucket p reads. Read it before deriving text to
// cache, and pass it to SetCachedAt.
func (s *Store) CacheStamp(ctx context.Context, p scope.Identity) (int64, error) {
	var st int64
	args := []any{}
	in := ""
	for _, l := range scope.Levels {
		if in != "" {
			in += ", "
		}
		in += "$" + strconv.Itoa(len(args)+1)
		args = append(args, Bucket(p, l))
	}
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM changes WHERE project IN (`+in+`)`, args...).Scan(&st)
	return st, err
}

// cacheName is the row name text derived at stamp is saved under.
func cacheName(name string, stamp int64) string { return fmt.Sprintf("%s@%d", name, stamp) }

// Cached returns the text last saved under name for project p, and whether
// there is one still true: text saved before a record p reads changed (a
// deletion by another process included) is not returned, so a deleted
// memory never comes back through it.
func (s *Store) Cached(ctx context.Context, p scope.Identity, name string) (string, bool, error) {
	st, err := s.CacheStamp(ctx, p)
	if err != nil {
		return "", false, err
	}
	var v string
	err = s.db.QueryRowContext(ctx, `SELECT value FROM cache WHERE project = $1 AND name = $2`, string(p), cacheName(name, st)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

// SetCached saves text under name for project p, as derived from the
// records as they are now. Prefer SetCachedAt with a stamp read before
// deriving the text.
func (s *Store) SetCached(ctx context.Context, p scope.Identity, name, text string) error {
	st, err := s.CacheStamp(ctx, p)
	if err != nil {
		return err
	}
	return s.SetCachedAt(ctx, p, name, text, st)
}

// SetCachedAt saves text, derived from project p's records as they stood
// at stamp, under name, replacing what was saved under it before. It is
// derived data: losing it costs a recomputation, nothing more.
func (s *Store) SetCachedAt(ctx context.Context, p scope.Identity, name, text string, stamp int64) error {
	if err := s.storable(name, text); err != nil {
		return err
	}
	var old string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM cache WHERE project = $1 AND name = $2`, string(p), cacheName(name, stamp)).Scan(&old)
	if err == nil && old == text {
		return nil // no write transaction for nothing
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		// Older text goes, and with it the words of records deleted since.
		// name@… by a range of bytes: LIKE ignores case on SQLite, not on
		// PostgreSQL, and would take another name's text on one of them.
		if _, err := tx.ExecContext(ctx, `DELETE FROM cache WHERE project = $1 AND (name = $2 OR name >= $3 AND name < $4)`,
			string(p), name, name+"@", name+"A"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO cache (project, name, value) VALUES ($1, $2, $3)`, string(p), cacheName(name, stamp), text)
		return err
	})
}
