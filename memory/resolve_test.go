package memory

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/scope"
)

// TestResolutionMatchesScopeResolve checks the store's SQL resolution
// against scope.Resolve, the reference, over random records of two projects.
func TestResolutionMatchesScopeResolve(t *testing.T) {
	s, _ := mustOpen(t)
	r := rand.New(rand.NewPCG(1, 2))
	var all []Record
	for i := 0; i < 300; i++ {
		p := projA
		if r.IntN(2) == 0 {
			p = projB
		}
		w := Write{Scope: scope.Levels[r.IntN(4)], Type: Types[r.IntN(4)], Key: fmt.Sprintf("k%d", r.IntN(25)), Body: fmt.Sprint("body ", i)}
		if w.Scope == scope.Project && (w.Type == Semantic || w.Type == Procedural) {
			w.Type = Semantic // keep clear of the mirrored-type conflict
		}
		rec, _, err := s.Put(ctx, p, w)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Scope == scope.Project && p.ID != projA.ID {
			continue // not visible to A
		}
		all = append(all, rec)
	}
	// Later writes replaced earlier ones with the same (scope, type, key).
	latest := map[string]Record{}
	for _, rec := range all {
		latest[fmt.Sprint(rec.Scope, rec.Type, rec.Key)] = rec
	}
	var visible []Record
	for _, rec := range latest {
		visible = append(visible, rec)
	}
	want := scope.Resolve(visible)
	got, _, err := s.List(ctx, projA.ID, ListOptions{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	key := func(rs []Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s/%s@%s", r.Type, r.Key, r.Scope))
		}
		sort.Strings(out)
		return out
	}
	if diff := cmp.Diff(key(want), key(got)); diff != "" {
		t.Errorf("store resolution differs from scope.Resolve (-want +got):\n%s", diff)
	}
}
