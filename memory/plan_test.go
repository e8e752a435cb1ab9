package memory

import (
	"database/sql"
	"strings"
	"testing"
)

// TestEffectiveWalksAnIndex checks that recall's read of each type comes
// in index order: a plan that sorts would read every record of the type
// before the first row, whatever the limit.
func TestEffectiveWalksAnIndex(t *testing.T) {
	s, _ := mustOpen(t)
	for _, typ := range []Type{Semantic, Procedural, Working} {
		rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+s.effectiveQuery(typ)+` LIMIT @limit`,
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
		"effective": s.effectiveQuery(Semantic) + ` LIMIT @limit`,
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
