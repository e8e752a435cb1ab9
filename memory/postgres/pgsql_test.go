package postgres

import (
	"strings"
	"testing"
)

func TestTranslateForPostgres(t *testing.T) {
	for _, c := range []struct {
		in, want string
		names    []string
		write    bool
	}{
		{in: `SELECT a FROM t WHERE x = ? AND y = ?`, want: `SELECT a FROM t WHERE x = $1 AND y = $2`},
		{in: `SELECT a FROM t WHERE x = ?1 OR y = ?1 AND z = ?2`, want: `SELECT a FROM t WHERE x = $1 OR y = $1 AND z = $2`},
		{in: `SELECT a FROM t WHERE p = @p AND q IN (@w, @p)`, want: `SELECT a FROM t WHERE p = $1 AND q IN ($2, $1)`, names: []string{"p", "w"}},
		{in: `SELECT '?', 'it''s @x', "@y" FROM t WHERE a = ?`, want: `SELECT '?', 'it''s @x', "@y" FROM t WHERE a = $1`},
		{in: `SELECT max(a, coalesce(b, 0)), max(c), min(d, e) FROM t`, want: `SELECT greatest(a, coalesce(b, 0)), max(c), least(d, e) FROM t`},
		{in: `SELECT coalesce((SELECT max(max(a), coalesce(max(b), 0)) FROM t), 0)`, want: `SELECT coalesce((SELECT greatest(max(a), coalesce(max(b), 0)) FROM t), 0)`},
		{in: `SELECT x FROM records r INDEXED BY records_list WHERE a = 1 LIMIT -1`, want: `SELECT x FROM records r WHERE a = 1 LIMIT ALL`},
		{in: `SELECT 1 FROM json_each(r.tags) WHERE json_each.value = @tag`, want: `SELECT 1 FROM jsonb_array_elements_text((r.tags)::jsonb) AS json_each(value) WHERE json_each.value = $1`, names: []string{"tag"}},
		{in: `SELECT r.x FROM records r WHERE r.rowid IN (SELECT value FROM json_each(?))`, want: `SELECT r.x FROM records r WHERE r.rowid = ANY (CAST(ARRAY(SELECT jsonb_array_elements_text(($1)::jsonb)) AS BIGINT[]))`},
		{in: `  INSERT INTO t (a) VALUES (?) ON CONFLICT DO NOTHING`, want: `  INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING`, write: true},
		{in: `DELETE FROM t WHERE a = ? RETURNING b`, want: `DELETE FROM t WHERE a = $1 RETURNING b`, write: true},
		{in: `PRAGMA user_version`, want: `SELECT coalesce(max(version), 0) FROM memory_migrations`},
		{in: "-- why\nDELETE FROM t", want: "-- why\nDELETE FROM t", write: true},
		{in: "WITH x AS (SELECT 1) DELETE FROM t WHERE a IN (SELECT * FROM x)", want: "WITH x AS (SELECT 1) DELETE FROM t WHERE a IN (SELECT * FROM x)", write: true},
		{in: "WITH gone AS (DELETE FROM t RETURNING a)\nSELECT count(*) FROM gone", want: "WITH gone AS (DELETE FROM t RETURNING a)\nSELECT count(*) FROM gone", write: true},
		{in: "WITH ids AS (SELECT updated_at FROM t) SELECT * FROM ids", want: "WITH ids AS (SELECT updated_at FROM t) SELECT * FROM ids"},
		{in: `SELECT a FROM t WHERE a LIKE ? ESCAPE '\' AND b not like 'like'`, want: `SELECT a FROM t WHERE a ILIKE $1 ESCAPE '\' AND b not ILIKE 'like'`},
	} {
		q, err := translate(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if q.sql != c.want || strings.Join(q.names, ",") != strings.Join(c.names, ",") || q.write != c.write {
			t.Errorf("%s\n got %s %v %v\nwant %s %v %v", c.in, q.sql, q.names, q.write, c.want, c.names, c.write)
		}
	}
	for _, bad := range []string{
		`INSERT OR IGNORE INTO t VALUES (1)`, `INSERT OR REPLACE INTO t VALUES (1)`, `UPDATE OR IGNORE t SET a = 1`,
		`REPLACE INTO t VALUES (1)`, `PRAGMA wal_checkpoint(TRUNCATE)`, `VACUUM INTO ?`,
		`SELECT a FROM t WHERE a = ? AND b = @b`,
	} {
		if q, err := translate(bad); err == nil {
			t.Errorf("%s translated to %s", bad, q.sql)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://ann:s3cret@db:5432/memory?sslmode=require":     "postgres://ann:xxxxx@db:5432/memory?sslmode=require",
		"postgres://ann@db/memory":                                 "postgres://ann@db/memory",
		"postgresql://db/memory?password=s3cret&user=ann":          "postgresql://db/memory?password=xxxxx&user=ann",
		"postgres://ann@db/memory?sslmode=disable;password=s3cret": "postgres://ann@db/memory?(unparsable)",
		"postgres://ann@db/memory#s3cret":                          "postgres://ann@db/memory",
		// A password holding @ and #, unescaped: its end would be shown
		// as the host.
		"postgres://ann:s3@cret#x@db/memory":                         "postgres://(unparsable URL)",
		"postgres://ann@db/memory?sslkey=k.pem&sslpassword=s3cret":   "postgres://ann@db/memory?sslkey=k.pem&sslpassword=xxxxx",
		"postgres://ann:s3cret@db/memory?sslpassword=s3cret":         "postgres://ann:xxxxx@db/memory?sslpassword=xxxxx",
		"postgres://ann:p%40ss@db/memory?password=s3cret&password=x": "postgres://ann:xxxxx@db/memory?password=xxxxx",
	} {
		if got := redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redact(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestTranslationCacheIsBounded(t *testing.T) {
	for i := range pgQueriesMax + 10 {
		q := `SELECT x FROM records r WHERE r.rowid IN (` + strings.Repeat("1,", i%50) + `0) AND r.key = ?` + strings.Repeat(" ", i/50)
		if _, err := pgTranslate(q); err != nil {
			t.Fatal(err)
		}
	}
	pgQueries.RLock()
	n := len(pgQueries.m)
	pgQueries.RUnlock()
	if n > pgQueriesMax {
		t.Fatalf("%d cached translations", n)
	}
}
