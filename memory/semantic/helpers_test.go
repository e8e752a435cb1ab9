package semantic

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/scope"
)

// testStore is a SQLite store and its Index, each method on the one that
// has it.
type testStore struct {
	*memory.Store
	*Index
}

// clock is an injected, settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openTarget(ctx context.Context, path string, opts *memory.Options) (*testStore, error) {
	b, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	st, err := memory.New(ctx, b, opts)
	if err != nil {
		return nil, err
	}
	return &testStore{st, New(st)}, nil
}

func mustOpen(tb testing.TB) (*testStore, *clock) {
	tb.Helper()
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s, err := openTarget(context.Background(), filepath.Join(tb.TempDir(), "db", "memory.db"), &memory.Options{Now: c.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, c
}

func openPath(tb testing.TB, path string) *testStore {
	tb.Helper()
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

var (
	projA = memory.Project{ID: scope.IdentityOf("/work/a")}
	projB = memory.Project{ID: scope.IdentityOf("/work/b")}
	ctx   = context.Background()
)

func put(tb testing.TB, s *testStore, p memory.Project, w memory.Write) memory.Record {
	tb.Helper()
	r, _, err := s.Put(ctx, p, w)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// migrations are the SQLite store's, read from its directory, for tests
// that build a database as an older build left it.
var migrations = os.DirFS("../sqlite")

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
