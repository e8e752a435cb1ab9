package memory

import (
	"context"
	"database/sql"
	"errors"

	"prom.codes/memory-mcp/scope"
)

// Cached returns the text last saved under name for project p, and whether
// there was one.
func (s *Store) Cached(ctx context.Context, p scope.Identity, name string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM cache WHERE project = ? AND name = ?`, string(p), name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

// SetCached saves text under name for project p. It is derived data: losing
// it costs a recomputation, nothing more.
func (s *Store) SetCached(ctx context.Context, p scope.Identity, name, text string) error {
	if old, ok, err := s.Cached(ctx, p, name); err == nil && ok && old == text {
		return nil // no write transaction for nothing
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cache (project, name, value) VALUES (?, ?, ?)
			ON CONFLICT (project, name) DO UPDATE SET value = excluded.value`, string(p), name, text)
		return err
	})
}
