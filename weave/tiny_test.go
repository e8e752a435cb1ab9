package weave

import (
	"math/rand"
	"strings"
	"testing"
)

// TestTinyBudgets weaves under every budget from 1 to 60 tokens: each block
// keeps the cap and its reported count, and once a budget can hold a line
// saying that memories were left out, the block says so rather than being
// empty.
func TestTinyBudgets(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	w := New()
	recs := randRecords(r, 12)
	eligible := 0
	for _, rec := range recs {
		if rec.Type == "semantic" || rec.Type == "procedural" {
			eligible++
		}
	}
	short := w.Count(notShown(eligible))
	for budget := 1; budget <= 60; budget++ {
		b := w.Weave(recs, Options{MaxTokens: budget})
		check(t, w, b, budget, eligible)
		if b.Markdown != "" && !strings.HasSuffix(b.Markdown, "\n") {
			t.Errorf("budget %d: %q does not end in a newline", budget, b.Markdown)
		}
		if budget >= short && b.Markdown == "" {
			t.Errorf("budget %d: empty block, though %q (%d tokens) fits", budget, notShown(eligible), short)
		}
	}
	if short > 8 {
		t.Errorf("the short line takes %d tokens; a budget of 8 should hold it", short)
	}
	for budget := 1; budget <= 8; budget++ {
		b := w.Weave(nil, Options{MaxTokens: budget})
		check(t, w, b, budget, 0)
	}
}
