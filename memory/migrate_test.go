package memory

import (
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// schemaOf lists the database's tables, indexes and triggers as SQLite
// keeps their definitions.
func schemaOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// A fresh database is made in one transaction; a database left at any
// older version by an earlier release is upgraded, keeping its records,
// to exactly the schema a fresh one gets.
func TestUpgradeFromEveryVersion(t *testing.T) {
	fresh, err := openTarget(ctx, filepath.Join(t.TempDir(), "memory.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := schemaOf(t, fresh.db)
	fresh.Close()

	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	for k := 1; k < len(names); k++ {
		t.Run(fmt.Sprintf("from version %d", k), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.db")
			db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			old := &Store{now: time.Now, path: path, db: db, writing: make(chan struct{}, 1)}
			if err := migrateTo(old.db, names, k); err != nil {
				t.Fatal(err)
			}
			var v int
			db.QueryRow("PRAGMA user_version").Scan(&v)
			if v != k {
				t.Fatalf("built version %d, want %d", v, k)
			}
			if _, err := db.Exec(`INSERT INTO records (id, project, scope, type, key, body, created_at, updated_at) VALUES ('01OLD', '', 3, 'semantic', 'old-fact', 'kept across upgrades', 1, 1)`); err != nil {
				t.Fatal(err)
			}
			db.Close()

			st, err := openTarget(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if diff := cmp.Diff(want, schemaOf(t, st.db)); diff != "" {
				t.Errorf("upgraded schema differs from a fresh one (-fresh +upgraded):\n%s", diff)
			}
			st.db.QueryRow("PRAGMA user_version").Scan(&v)
			if v != SchemaVersion() {
				t.Errorf("user_version = %d, want %d", v, SchemaVersion())
			}
			r, err := st.Peek(ctx, projA.ID, Selector{Key: "old-fact"})
			if err != nil || r.Body != "kept across upgrades" {
				t.Fatalf("the old record after the upgrade: %+v, %v", r, err)
			}
		})
	}
}

// Opening an existing database at the current schema takes no write
// transaction when nothing has expired: several processes starting at
// once do not queue for the write lock.
func TestOpenTakesNoWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, projA, Write{Scope: 0, Type: Semantic, Key: "k", Body: "b"})
	// Hold the write lock from another connection while opening again.
	lock, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	tx, err := lock.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE records SET body = body`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s2, err := openTarget(ctx, path, nil)
		if err == nil {
			s2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !strings.Contains(err.Error(), "locked") {
			t.Fatal(err)
		} else if err != nil {
			t.Fatalf("open waited for the write lock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("open waited for the write lock")
	}
	s.Close()
}

// A use count an earlier import let in out of range (one overflowed to a
// REAL by its next use, which broke every listing, or a negative one) is
// brought into range by the upgrade, and the records list again.
func TestUpgradeBoundsUseCounts(t *testing.T) {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	path := filepath.Join(t.TempDir(), "memory.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(db, names, len(names)-1); err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"9.2233720368547758e18", "-5", "7"} {
		if _, err := db.Exec(fmt.Sprintf(`INSERT INTO records (id, project, scope, type, key, body, created_at, updated_at, use_count)
			VALUES ('01OLD%d', '', 3, 'semantic', 'counted-%d', 'b', 1, 1, %s)`, i, i, n)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	st, err := openTarget(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, _, err := st.List(ctx, projA.ID, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range recs {
		got[r.Key] = r.UseCount
	}
	if want := map[string]int64{"counted-0": MaxUseCount, "counted-1": 0, "counted-2": 7}; !cmp.Equal(got, want) {
		t.Errorf("use counts after the upgrade: %v, want %v", got, want)
	}
}
