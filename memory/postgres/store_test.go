package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/postgres"
	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/scope"
)

var (
	ctx   = context.Background()
	projA = memory.Project{ID: scope.IdentityOf("/work/a")}
)

// open opens a store on the database at target, and returns it with its
// backend, whose pool the tests query directly.
func open(t *testing.T, target string) (*memory.Store, *postgres.DB) {
	t.Helper()
	db, err := postgres.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	s, err := memory.New(ctx, db, nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db
}

// The search index of every replica catches up from the changes table by
// reading the rows past the last seq it applied. That is only sound if no
// change commits with a seq below one already visible: a poller that has
// seen seq N must never later find a row below N it did not see. Writers
// in several stores race here while a poller catches up the way the index
// does; every row left at the end at or below what the poller reached must
// have been seen by it.
func TestPostgresChangesCommitInOrder(t *testing.T) {
	target := storetest.NewPostgres(t)
	_, pollerDB := open(t, target)
	seen := map[int64]bool{}
	var last int64
	catchUp := func() {
		rows, err := pollerDB.DB().QueryContext(ctx, `SELECT seq FROM changes WHERE seq > $1 ORDER BY seq`, last)
		if err != nil {
			t.Error(err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				t.Error(err)
				return
			}
			seen[seq] = true
			last = max(last, seq)
		}
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		s, _ := open(t, target)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				// Every writer also changes a record all share, so that
				// rows are replaced under new seqs as well as added.
				for _, key := range []string{fmt.Sprintf("w%d-%d", w, i), "shared"} {
					if _, _, err := s.Put(ctx, projA, memory.Write{Type: memory.Semantic, Key: key, Body: fmt.Sprintf("body %d %d", w, i)}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	for polling := true; polling; {
		select {
		case <-done:
			polling = false
		default:
		}
		catchUp()
	}
	rows, err := pollerDB.DB().QueryContext(ctx, `SELECT seq FROM changes WHERE seq <= $1`, last)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		n++
		if !seen[seq] {
			t.Errorf("change %d committed after the poller had read past it (at %d)", seq, last)
		}
	}
	if n < 100 {
		t.Fatalf("only %d changes", n)
	}
}

// Two write transactions of two stores: the second waits for the first's
// commit before it runs a statement, so the seq it takes is given after
// the first's are visible.
func TestPostgresWritersTakeTurns(t *testing.T) {
	target := storetest.NewPostgres(t)
	a, adb := open(t, target)
	_, bdb := open(t, target)
	for _, key := range []string{"x", "y"} {
		if _, _, err := a.Put(ctx, projA, memory.Write{Type: memory.Semantic, Key: key, Body: key + "0"}); err != nil {
			t.Fatal(err)
		}
	}

	tx1, end1, err := adb.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer end1(false)
	if _, err := tx1.ExecContext(ctx, `UPDATE records SET body = 'x1' WHERE key = 'x'`); err != nil {
		t.Fatal(err)
	}
	var pid1 int
	if err := tx1.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		tx2, end2, err := bdb.BeginWrite(ctx)
		if err != nil {
			done <- err
			return
		}
		defer end2(false)
		if _, err := tx2.ExecContext(ctx, `UPDATE records SET body = 'y1' WHERE key = 'y'`); err != nil {
			done <- err
			return
		}
		done <- end2(true)
	}()
	// Wait until the second writer waits for the advisory lock held by
	// the first.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting bool
		if err := adb.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks w JOIN pg_locks h ON h.locktype = 'advisory'
			AND h.objid = w.objid AND h.classid = w.classid AND h.granted WHERE w.locktype = 'advisory' AND NOT w.granted AND h.pid = $1)`, pid1).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the second writer committed (%v) while the first was open", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the second writer never waited for the first")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := end1(true); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var sx, sy int64
	if err := adb.DB().QueryRowContext(ctx, `SELECT (SELECT c.seq FROM changes c JOIN records r ON r.rowid = c.rid WHERE r.key = 'x'),
		(SELECT c.seq FROM changes c JOIN records r ON r.rowid = c.rid WHERE r.key = 'y')`).Scan(&sx, &sy); err != nil {
		t.Fatal(err)
	}
	if sx >= sy {
		t.Fatalf("seq of the first commit %d, of the second %d", sx, sy)
	}
}

// Every table and column of the SQLite schema is in the PostgreSQL one: a
// new SQLite migration needs its PostgreSQL twin in migrations/postgres.
func TestPostgresSchemaMatchesSQLite(t *testing.T) {
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memory.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	_, pg := open(t, storetest.NewPostgres(t))
	columns := func(db *sql.DB, q string) map[string]bool {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]bool{}
		for rows.Next() {
			var table, col string
			if err := rows.Scan(&table, &col); err != nil {
				t.Fatal(err)
			}
			out[table+"."+col] = true
		}
		return out
	}
	want := columns(lite.DB(), `SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
	got := columns(pg.DB(), `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`)
	for c := range want {
		if !got[c] {
			t.Errorf("PostgreSQL schema lacks %s", c)
		}
	}
	for c := range got {
		if !want[c] && !strings.HasPrefix(c, "memory_migrations.") && c != "statement_sessions.rowid" && c != "records.rowid" {
			t.Errorf("PostgreSQL schema has %s, which SQLite does not", c)
		}
	}
}

// What no check of the store's input caught (a cache name, a project's
// root on a file system that allows any bytes) and PostgreSQL cannot hold
// is an invalid_argument naming the cause, not the server's encoding error.
func TestPostgresUnstorableValue(t *testing.T) {
	s, _ := open(t, storetest.NewPostgres(t))
	for what, err := range map[string]error{
		"cache name": s.SetCached(ctx, "p", "name\x00", "text"),
		"root":       s.NoteRoot(ctx, "p", "/work/\xff"),
	} {
		var me *memory.Error
		if !errors.As(err, &me) || me.Code != memory.CodeInvalidArgument || !strings.Contains(err.Error(), "PostgreSQL cannot store") {
			t.Errorf("%s = %v, want invalid_argument", what, err)
		}
	}
	if err := s.NoteRoot(ctx, "p", "/work/ünïcode"); err != nil {
		t.Fatal(err)
	}
}

// The server ends a store's transaction left idle (a replica frozen in the
// middle of a write), unless the URL says otherwise.
func TestPostgresIdleTransactionsEnd(t *testing.T) {
	target := storetest.NewPostgres(t)
	for url, want := range map[string]string{
		target: "1min",
		target + "&idle_in_transaction_session_timeout=5s": "5s",
	} {
		db, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.DB().QueryRowContext(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil || got != want {
			t.Errorf("idle_in_transaction_session_timeout = %q, %v; want %q", got, err, want)
		}
		db.Close()
	}
}

// A database at the first schema, with sessions' statements in it, takes
// the later migrations on open and keeps what it held.
func TestPostgresMigratesFirstSchema(t *testing.T) {
	target := storetest.NewPostgres(t)
	s, err := storetest.OpenTarget(ctx, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Back to the first schema, as a database made by the build that had
	// only it.
	for _, q := range []string{
		`DROP INDEX statement_sessions_key`, `DROP INDEX statement_sessions_statement`,
		`ALTER TABLE statement_sessions ADD PRIMARY KEY (project, statement, session_id)`,
		`DROP INDEX records_list`,
		`CREATE INDEX records_name ON records (type, key, scope)`,
		`CREATE INDEX records_list ON records (key, type)`,
		`DROP TABLE embed_wanted`,
		`DROP FUNCTION sync_records_insert, sync_records_delete, sync_records_update, sync_queue CASCADE`,
		`DROP TABLE sync_on, sync_applying, sync_outbox, sync_names, sync_log, sync_conflicts, sync_aside, sync_meta, sync_machines, sync_held`,
		`DELETE FROM memory_migrations WHERE version > 1`,
	} {
		if _, err := db.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	p := memory.Project{ID: "p"}
	if _, err := s.Capture(ctx, p, memory.Capture{SessionID: "s1", Statements: []string{"Releases are tagged on main."}}, 2); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = storetest.OpenTarget(ctx, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names, _ := filepath.Glob("migrations/*.sql")
	if v, err := db.Schema(ctx); err != nil || v != len(names) {
		t.Fatalf("version = %d, %v; want %d", v, err, len(names))
	}
	res, err := s.Capture(ctx, p, memory.Capture{SessionID: "s2", Statements: []string{"Releases are tagged on main."}}, 2)
	if err != nil || len(res.Promoted) != 1 {
		t.Fatalf("second session after the migration = %+v, %v", res, err)
	}
}

// Reading the records of semantic hits, each time for another set of
// rowids, prepares one statement per connection, not one per set: the
// server keeps every statement a connection prepared.
func TestPostgresHitsReadWithOneStatement(t *testing.T) {
	s, db := open(t, storetest.NewPostgres(t))
	db.DB().SetMaxOpenConns(1)
	p := memory.Project{ID: "p"}
	prepared := func() int {
		var n int
		if err := db.DB().QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := prepared()
	for i := range 40 {
		ids := []int64{int64(i), int64(i + 1000), int64(i * 7)}
		if _, err := s.Found(ctx, p.ID, memory.SearchOptions{}, ids); err != nil {
			t.Fatal(err)
		}
	}
	if n := prepared() - before; n > 2 {
		t.Errorf("%d statements prepared on one connection for 40 reads of hits", n)
	}
}
