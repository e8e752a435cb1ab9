package memory

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"

	"prom.codes/memory-mcp/memory/postgres"
	"prom.codes/memory-mcp/memory/sqlite"
)

// openTarget opens the SQLite file at target, or the PostgreSQL database a
// postgres:// URL names, as the commands do.
func openTarget(ctx context.Context, target string, opts *Options) (*Store, error) {
	var b Backend
	var err error
	if IsURL(target) {
		b, err = postgres.Open(ctx, target)
	} else {
		b, err = sqlite.Open(ctx, target)
	}
	if err != nil {
		return nil, err
	}
	return New(ctx, b, opts)
}

// migrations are the SQLite store's, read from its directory, for tests
// that build a database as an older build left it.
var migrations = os.DirFS("sqlite")

// migrateTo brings the SQLite schema of db from its version to target,
// running names (paths in migrations) as memory/sqlite does.
func migrateTo(db *sql.DB, names []string, target int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	for ; v < target; v++ {
		body, err := fs.ReadFile(migrations, names[v])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", names[v], err)
		}
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", target)); err != nil {
		return err
	}
	return tx.Commit()
}

// SchemaVersion is the SQLite store's.
func SchemaVersion() int { return sqlite.SchemaVersion() }
