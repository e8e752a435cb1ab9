// Package backend opens a memory.Store on the backend a target names: the
// SQLite file at a path, or the PostgreSQL database of a postgres:// URL.
// It is the one place that chooses between them. It imports memory,
// memory/sqlite and memory/postgres.
package backend

import (
	"context"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/postgres"
	"prom.codes/memory-mcp/memory/sqlite"
)

// Open opens the store at target: the SQLite file, or the PostgreSQL
// database a postgres:// URL names. Errors are those of sqlite.Open,
// postgres.Open and memory.New.
func Open(ctx context.Context, target string, opts *memory.Options) (*memory.Store, error) {
	var b memory.Backend
	var err error
	if memory.IsURL(target) {
		b, err = postgres.Open(ctx, target)
	} else {
		b, err = sqlite.Open(ctx, target)
	}
	if err != nil {
		return nil, err
	}
	return memory.New(ctx, b, opts)
}
