package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/weave"
)

// TestRecallReadsMoreWhenItFits checks the recall's reading in rounds: with
// more small records than the first round reads, ranked by use and recency
// as well as confidence, the block is the one woven from every record at
// once, for tight and roomy budgets.
func TestRecallReadsMoreWhenItFits(t *testing.T) {
	root := t.TempDir()
	vars := map[string]string{"PROMETHEUS_MEMORY_DB_PATH": filepath.Join(t.TempDir(), "memory.db"), "PROMETHEUS_WORKSPACE_ROOT": root}
	cfg, err := loadConfig(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := openApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	p := memory.Project{ID: cfg.Project}
	var ids []string
	for i := range 150 {
		typ := memory.Semantic
		conf := 0.5
		if i%3 == 0 {
			typ, conf = memory.Procedural, float64(i%10)/10
		}
		lvl := []scope.Level{scope.Workspace, scope.System}[i%2]
		rec, _, err := a.Store.Put(ctx, p, memory.Write{Scope: lvl, Type: typ, Key: fmt.Sprintf("note-%03d", i), Body: fmt.Sprintf("Fact %d.", i), Confidence: &conf})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	// Used, newest first: the records written first were used last, so
	// the most recent use, not the last change, decides among equals.
	// Procedures of low confidence are used once more: procedures rank by
	// use, not by confidence.
	for i := len(ids) - 1; i >= 0; i-- {
		if err := a.Store.Touch(ctx, []string{ids[i]}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 && i%10 < 3 {
			if err := a.Store.Touch(ctx, []string{ids[i]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, budget := range []int{300, 1500, 8000} {
		all, err := a.Store.Effective(ctx, cfg.Project, []memory.Type{memory.Semantic, memory.Procedural}, 0)
		if err != nil {
			t.Fatal(err)
		}
		total, err := a.Store.CountAll(ctx, cfg.Project)
		if err != nil {
			t.Fatal(err)
		}
		want := a.Weaver.Weave(all, weave.Options{MaxTokens: budget, Unlisted: total - len(all)})
		got, err := a.Recall(ctx, "", nil, budget)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Markdown, got.Markdown); diff != "" {
			t.Errorf("budget %d: block read in rounds differs from the one woven at once (-want +got):\n%s", budget, diff)
		}
		if budget == 8000 && len(got.Included) != 150 {
			t.Errorf("budget 8000: %d records included, want all 150", len(got.Included))
		}
	}
}
