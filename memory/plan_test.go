package memory

import (
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestEffectiveWalksAnIndex checks that recall's read of each type comes
// in index order: a plan that sorts would read every record of the type
// before the first row, whatever the limit.
func TestEffectiveWalksAnIndex(t *testing.T) {
	s, _ := mustOpen(t)
	for _, typ := range []Type{Semantic, Procedural, Working} {
		rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+effectiveQuery(typ)+` LIMIT @limit`,
			append(s.args(projA.ID, sql.Named("type", string(typ))), sql.Named("limit", 10))...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if p := strings.Join(plan, "\n"); strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: the plan sorts:\n%s", typ, p)
		}
	}
}

// planOf is SQLite's plan for q, one step a line.
func planOf(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "\n")
}

// TestShadowCheckUsesTheKeyIndex checks that one index with the key first
// serves both the check every read makes for a narrower record of the same
// type and key, and the list's order: each must find its rows by key,
// type and scope, and the list must not sort.
func TestShadowCheckUsesTheKeyIndex(t *testing.T) {
	s, _ := mustOpen(t)
	const shadow = "SEARCH n USING INDEX records_list (key=? AND type=? AND scope<?)"
	args := s.args(projA.ID, sql.Named("type", string(Semantic)), sql.Named("key", "k"), sql.Named("limit", 10))
	for name, q := range map[string]string{
		"resolve":   `SELECT ` + cols + ` FROM records r WHERE r.key = @key AND (@type = '' OR r.type = @type) AND ` + effective + ` ORDER BY r.type`,
		"count":     `SELECT count(*) FROM records r WHERE r.type = @type AND ` + effective,
		"effective": effectiveQuery(Semantic) + ` LIMIT @limit`,
		"list":      `SELECT ` + colsNoBody + ` FROM records r INDEXED BY records_list WHERE ` + effective + ` ORDER BY r.key, r.type LIMIT @limit`,
	} {
		p := planOf(t, s, q, args...)
		if !strings.Contains(p, shadow) {
			t.Errorf("%s: the shadow check does not walk records_list by key, type and scope:\n%s", name, p)
		}
		if strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: the plan sorts:\n%s", name, p)
		}
	}
}

// TestUpgradedWeaveIndexes: a database from before the index of
// procedures held procedures alone gets that index made again; recall
// then reads every procedure in its order (use count, then recency), and
// every fact as before, including records written before and after the
// upgrade.
func TestUpgradedWeaveIndexes(t *testing.T) {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	path := filepath.Join(t.TempDir(), "memory.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	old := &Store{now: time.Now, path: path, db: db, writing: make(chan struct{}, 1)}
	if err := old.migrateTo(ctx, names, slices.Index(names, "migrations/0021_weave_use_procedures.sql")); err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"procedural", "semantic", "procedural", "semantic"} {
		if _, err := db.Exec(`INSERT INTO records (id, project, scope, type, key, body, use_count, created_at, updated_at) VALUES (?, ?, 0, ?, ?, 'kept', ?, 1, 1)`,
			fmt.Sprintf("01OLD%d", i), string(projA.ID), typ, fmt.Sprintf("old-%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put(t, s, projA, Write{Type: Procedural, Key: "new-how", Body: "1. Run it."})
	put(t, s, projA, Write{Type: Semantic, Key: "new-fact", Body: "It runs."})
	keys := func(t Type) []string {
		recs, err := s.Effective(ctx, projA.ID, []Type{t}, 0)
		if err != nil {
			panic(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.Key)
		}
		return out
	}
	if got, want := keys(Procedural), []string{"old-2", "new-how", "old-0"}; !slices.Equal(got, want) {
		t.Errorf("procedures in recall's order: %v, want %v", got, want)
	}
	if got := keys(Semantic); len(got) != 3 || !slices.Contains(got, "new-fact") || !slices.Contains(got, "old-3") || !slices.Contains(got, "old-1") {
		t.Errorf("facts: %v, want old-3, old-1 and new-fact", got)
	}
	var sqlText string
	if err := s.db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'records_weave_use'`).Scan(&sqlText); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(sqlText, "WHERE type = 'procedural'") {
		t.Errorf("the index of procedures: %s", sqlText)
	}
}
