package storetest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/scope"
)

// terminate ends every other connection to target's database, as a
// failover or an administrator would, and reports how many.
func terminate(t *testing.T, target string) int {
	t.Helper()
	u, _ := url.Parse(target)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, strings.TrimPrefix(u.Path, "/")).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Connections killed under a store: reads carry on, writes carry on, and
// every write the store acknowledged is in the database afterwards.
func TestPostgresConnectionLoss(t *testing.T) {
	target := storetest.NewPostgres(t)
	s := storetest.Open(t, target, nil)
	p := memory.Project{ID: scope.IdentityOf("/work/loss")}
	ctx := context.Background()
	put := func(key string) error {
		_, _, err := s.Put(ctx, p, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: key, Body: "survives " + key})
		return err
	}
	if err := put("before"); err != nil {
		t.Fatal(err)
	}
	if n := terminate(t, target); n == 0 {
		t.Fatal("no connection to terminate")
	}
	// A lost connection is not the caller's problem: the next calls work.
	if _, err := s.Get(ctx, p.ID, memory.Selector{Key: "before"}); err != nil {
		t.Fatalf("get after the connections were lost: %v", err)
	}
	if err := put("after"); err != nil {
		t.Fatalf("put after the connections were lost: %v", err)
	}

	// Now while writers and readers are busy.
	var mu sync.Mutex
	var acked []string
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				err := put(key)
				mu.Lock()
				if err == nil {
					acked = append(acked, key)
				} else {
					failed++
					t.Logf("put %s: %v", key, err)
				}
				mu.Unlock()
				if _, err := s.Search(ctx, p.ID, memory.SearchOptions{Query: "survives"}); err != nil {
					t.Errorf("search: %v", err)
				}
			}
		}()
	}
	for range 5 {
		time.Sleep(60 * time.Millisecond)
		terminate(t, target)
	}
	time.Sleep(60 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := put("last"); err != nil {
		t.Fatalf("put after the losses: %v", err)
	}
	t.Logf("%d writes acknowledged, %d failed", len(acked), failed)
	if len(acked) == 0 {
		t.Fatal("no write went through")
	}
	// A store opened afresh finds every acknowledged write.
	fresh := storetest.Open(t, target, nil)
	for _, k := range append(acked, "before", "after", "last") {
		if r, err := fresh.Get(ctx, p.ID, memory.Selector{Key: k}); err != nil || r.Body != "survives "+k {
			t.Errorf("acknowledged write %s: %+v, %v", k, r, err)
		}
	}
	if n, err := fresh.Count(ctx, p.ID, memory.Semantic); err != nil || n < len(acked)+3 {
		t.Errorf("count = %d, %v; want at least %d", n, err, len(acked)+3)
	}
}

// The URL's password never shows: not in Path, not in an error.
func TestPostgresPasswordNeverShown(t *testing.T) {
	u, err := url.Parse(storetest.NewPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2-secret")
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	// The test cluster trusts loopback, so the password is not checked.
	s := storetest.Open(t, u.String(), nil)
	if strings.Contains(s.Path(), "hunter2") || !strings.HasPrefix(s.Path(), "postgres://") {
		t.Errorf("Path() = %s", s.Path())
	}
	if s.Backend() != "postgres" {
		t.Errorf("Backend() = %s", s.Backend())
	}
	u.Host = "127.0.0.1:1" // nothing listens there
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = storetest.OpenTarget(ctx, u.String(), nil)
	if err == nil {
		t.Fatal("opened a database nobody serves")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
	if !memory.IsURL(u.String()) || memory.IsURL("/tmp/memory.db") || !memory.IsURL("postgresql://x/y") {
		t.Error("IsURL")
	}
	// A scheme in capitals is the same scheme.
	upper := storetest.Open(t, "POSTGRESQL"+strings.TrimPrefix(storetest.NewPostgres(t), "postgres"), nil)
	if err := upper.Ping(context.Background()); err != nil {
		t.Errorf("ping through a POSTGRESQL:// URL: %v", err)
	}
}

// What only a SQLite file can do says what to use instead.
func TestPostgresUnsupported(t *testing.T) {
	s := storetest.Open(t, storetest.NewPostgres(t), nil)
	err := s.Backup(context.Background(), t.TempDir()+"/copy.db")
	if !errorsIs(err, memory.ErrUnsupported) || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("backup = %v", err)
	}
	if err := s.RestoreFrom(context.Background(), t.TempDir()+"/x.db", t.TempDir()+"/keep.db", nil); !errorsIs(err, memory.ErrUnsupported) {
		t.Errorf("restore = %v", err)
	}
}

// A database that does not exist says how to make one.
func TestPostgresMissingDatabase(t *testing.T) {
	u, err := url.Parse(storetest.NewPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_memory_db"
	_, err = storetest.OpenTarget(context.Background(), u.String(), nil)
	if err == nil || !strings.Contains(err.Error(), "create the database first") {
		t.Fatalf("open of a missing database = %v", err)
	}
}

// pgExec runs stmts on target as its user.
func pgExec(t *testing.T, target string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// A database migrated by a newer build is refused, and left as it was.
func TestPostgresNewerSchemaRefused(t *testing.T) {
	target := storetest.NewPostgres(t)
	s := storetest.Open(t, target, nil)
	put := func(s *memory.Store) error {
		_, _, err := s.Put(context.Background(), projX, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "kept", Body: "still here"})
		return err
	}
	if err := put(s); err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgExec(t, target, `INSERT INTO memory_migrations (version, applied_at) VALUES (99, 0)`)
	_, err := storetest.OpenTarget(context.Background(), target, nil)
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("open of a newer schema = %v", err)
	}
	pgExec(t, target, `DELETE FROM memory_migrations WHERE version = 99`)
	s = storetest.Open(t, target, nil)
	if r, err := s.Get(context.Background(), projX.ID, memory.Selector{Key: "kept"}); err != nil || r.Body != "still here" {
		t.Fatalf("after the refusal = %+v, %v", r, err)
	}
}

var projX = memory.Project{ID: scope.IdentityOf("/work/x")}

// A role that may only log in is told what it lacks; one that owns a
// schema of its own, named in the URL, migrates and works there, apart
// from another schema of the same database; no password of the URL, the
// client key's included, shows in Path.
func TestPostgresLeastPrivilege(t *testing.T) {
	var b [4]byte
	rand.Read(b[:])
	role := "memrole_" + hex.EncodeToString(b[:])
	// Registered first, so it runs last: after the database is dropped.
	t.Cleanup(func() { pgExec(t, storetest.PostgresServer(t), `DROP ROLE IF EXISTS `+role) })
	target := storetest.NewPostgres(t)
	ctx := context.Background()
	pgExec(t, target, `CREATE ROLE `+role+` LOGIN PASSWORD 'pw-s3cret'`, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
	u, _ := url.Parse(target)
	u.User = url.UserPassword(role, "pw-s3cret")
	_, err := storetest.OpenTarget(ctx, u.String(), nil)
	if err == nil || !strings.Contains(err.Error(), "GRANT CREATE ON SCHEMA") || strings.Contains(err.Error(), "pw-s3cret") {
		t.Fatalf("open without CREATE = %v", err)
	}
	q := u.Query()
	q.Set("search_path", "no_such_schema")
	missing := *u
	missing.RawQuery = q.Encode()
	_, err = storetest.OpenTarget(ctx, missing.String(), nil)
	if err == nil || !strings.Contains(err.Error(), "search_path names does not exist") || strings.Contains(err.Error(), "pw-s3cret") {
		t.Fatalf("open with a search_path naming no schema = %v", err)
	}
	pgExec(t, target, `CREATE SCHEMA team_a AUTHORIZATION `+role, `CREATE SCHEMA team_b AUTHORIZATION `+role)
	open := func(schema string) *memory.Store {
		q := u.Query()
		q.Set("search_path", schema)
		q.Set("sslpassword", "key-s3cret")
		u := *u
		u.RawQuery = q.Encode()
		s := storetest.Open(t, u.String(), nil)
		if strings.Contains(s.Path(), "s3cret") {
			t.Errorf("Path() = %s", s.Path())
		}
		return s
	}
	a, bs := open("team_a"), open("team_b")
	if _, _, err := a.Put(ctx, projX, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: "only-a", Body: "in team a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, projX.ID, memory.Selector{Key: "only-a"}); err != nil {
		t.Fatal(err)
	}
	if h, err := a.Search(ctx, projX.ID, memory.SearchOptions{Query: "team"}); err != nil || len(h) != 1 {
		t.Fatalf("search in team_a = %v, %v", h, err)
	}
	if _, err := bs.Get(ctx, projX.ID, memory.Selector{Key: "only-a"}); !errorsIs(err, memory.ErrNotFound) {
		t.Fatalf("team_b sees team_a's record: %v", err)
	}
	var n int
	conn, err := pgx.Connect(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables in public = %d, %v", n, err)
	}
}

// A replica whose clock runs two days ahead purges nothing the database's
// clock has not seen expire: it would delete, for every replica, records
// still alive.
func TestPostgresFastClockPurgesNothingEarly(t *testing.T) {
	target := storetest.NewPostgres(t)
	right, fast := storetest.NewClock(), storetest.NewClock()
	right.Add(time.Since(right.Now()))
	fast.Add(time.Since(fast.Now()) + 48*time.Hour)
	a := storetest.Open(t, target, right)
	hour := time.Hour
	p := memory.Project{ID: scope.IdentityOf("/work/clock")}
	for _, typ := range []memory.Type{memory.Episodic, memory.Semantic} {
		if _, _, err := a.Put(context.Background(), p, memory.Write{Scope: scope.Project, Type: typ, Key: "alive", Body: "for an hour", TTL: &hour}); err != nil {
			t.Fatal(err)
		}
	}
	b := storetest.Open(t, target, fast) // opening purges
	if n, err := b.Purge(context.Background()); err != nil || n != 0 {
		t.Errorf("purge by the fast replica = %d, %v", n, err)
	}
	if n, err := b.PurgeMirrored(context.Background(), p); err != nil || n != 0 {
		t.Errorf("purge of mirrored records by the fast replica = %d, %v", n, err)
	}
	for _, typ := range []memory.Type{memory.Episodic, memory.Semantic} {
		if r, err := a.Get(context.Background(), p.ID, memory.Selector{Key: "alive", Type: typ}); err != nil || r.Body != "for an hour" {
			t.Errorf("%s record after the fast replica's purge = %+v, %v", typ, r, err)
		}
	}
}

// NewPostgres gives each test an empty database of its own.
func TestNewPostgresGivesAnEmptyDatabaseOfItsOwn(t *testing.T) {
	a, b := storetest.NewPostgres(t), storetest.NewPostgres(t)
	if a == b {
		t.Fatalf("two tests share %s", a)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("new database has %d tables", n)
	}
}
