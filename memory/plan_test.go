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
