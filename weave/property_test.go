package weave

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

var words = []string{
	"the", "test", "runner", "uses", "make", "go", "SQLite", "WAL", "scope", "fact", "über", "naïve",
	"日本語", "テスト", "🚀", "e\u0301", "Ωmega", "x", "42", "3.14", "don't", "we'll", "--flag", "a|b",
	"<|endoftext|>", "#", "`code`", "**bold**", "_em_", "\\", "$HOME", "{}", "[link](http://x)",
}

// randText is a run of n words with random punctuation and spacing.
func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString([]string{" ", " ", " ", "  ", "\t", ", ", ". "}[r.Intn(7)])
		}
		b.WriteString(words[r.Intn(len(words))])
	}
	return b.String()
}

// randBody builds markdown from random blocks: prose, long lines, headings of
// both kinds, fenced code full of '#', lists, blank runs, CRLF and the odd
// invalid byte.
func randBody(r *rand.Rand) string {
	var b strings.Builder
	for range r.Intn(6) {
		switch r.Intn(10) {
		case 0:
			fmt.Fprintf(&b, "%s %s\n", strings.Repeat("#", 1+r.Intn(7)), randText(r, 1+r.Intn(5)))
		case 1:
			fence := []string{"```", "~~~", "````"}[r.Intn(3)]
			fmt.Fprintf(&b, "%sgo\n# not a heading\n%s\n## nor this\n", fence, randText(r, 5))
			if r.Intn(4) > 0 {
				b.WriteString(fence + "\n")
			}
		case 2:
			fmt.Fprintf(&b, "\n%s\n%s\n", randText(r, 3), strings.Repeat("=-"[r.Intn(2):][:1], 1+r.Intn(10)))
		case 3:
			b.WriteString(randText(r, 60+r.Intn(100)) + "\n") // a long line
		case 4:
			fmt.Fprintf(&b, "- %s\n- %s\n", randText(r, 4), randText(r, 4))
		case 5:
			b.WriteString(strings.Repeat("\n", r.Intn(4)))
		case 6:
			fmt.Fprintf(&b, "%s\r\n", randText(r, 6))
		case 7:
			b.WriteString(strings.Repeat(" ", r.Intn(5)) + "\xff" + randText(r, 2) + "\n")
		default:
			b.WriteString(randText(r, 5+r.Intn(30)) + "\n\n")
		}
	}
	return b.String()
}

func randRecords(r *rand.Rand, n int) []memory.Record {
	recs := make([]memory.Record, n)
	for i := range recs {
		rec := memory.Record{
			ID:          fmt.Sprintf("id%04d", i),
			Scope:       scope.Levels[r.Intn(len(scope.Levels))],
			Type:        memory.Types[r.Intn(len(memory.Types))],
			Key:         fmt.Sprintf("k%d", r.Intn(n+1)), // keys may repeat across types and scopes
			Description: randText(r, r.Intn(6)),
			Body:        randBody(r),
			Confidence:  float64(r.Intn(5)) / 4, // few values, many ties
			UseCount:    int64(r.Intn(4)),
			UpdatedAt:   t0.Add(time.Duration(r.Intn(5)) * time.Hour),
		}
		if r.Intn(2) == 0 {
			rec.LastAccessedAt = ptr(t0.Add(time.Duration(r.Intn(5)) * time.Hour))
		}
		recs[i] = rec
	}
	return recs
}

// TestWeaveProperties weaves random records under random budgets and checks
// what must hold of every block, and of every capped index.
func TestWeaveProperties(t *testing.T) {
	iters := 500
	if raceEnabled || testing.Short() {
		iters = 40 // the race run looks for races; the plain run covers the properties
	}
	r := rand.New(rand.NewSource(1))
	w := New()
	for i := range iters {
		recs := randRecords(r, r.Intn(30))
		// Log-uniform over 50..8000: tight budgets, where the edge cases
		// live, come up as often as roomy ones.
		budget := int(50 * math.Pow(160, r.Float64()))
		eligible := 0
		var ids []string
		for _, rec := range recs {
			if rec.Type == memory.Semantic || rec.Type == memory.Procedural {
				eligible++
			}
			ids = append(ids, rec.ID)
		}
		var relevant []string
		for range r.Intn(5) {
			if len(ids) > 0 && r.Intn(4) > 0 {
				relevant = append(relevant, ids[r.Intn(len(ids))])
			} else {
				relevant = append(relevant, "missing")
			}
		}
		opts := Options{MaxTokens: budget, Relevant: relevant}
		b := w.Weave(recs, opts)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			check(t, w, b, budget, eligible)
			if eligible > 0 && len(b.Included) == 0 && b.Markdown != "" && !strings.HasPrefix(b.Markdown, title) {
				t.Errorf("no record fits, yet Markdown = %q", b.Markdown)
			}
			checkHeadings(t, b.Markdown)
			checkRelevantFirst(t, b.Included, recs, relevant)

			// Weave again, with the records in another order: same block.
			shuffled := append([]memory.Record(nil), recs...)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if diff := cmp.Diff(b, w.Weave(shuffled, opts)); diff != "" {
				t.Errorf("shuffled weave differs:\n%s", diff)
			}

			capped := 20 + r.Intn(500)
			md, tokens := w.Index(recs, capped, 0)
			if n := w.Count(md); tokens != n || tokens > capped {
				t.Errorf("Index(%d): tokens = %d, Count = %d", capped, tokens, n)
			}
			md, tokens = w.Index(recs, 0, 0)
			if n := w.Count(md); tokens != n {
				t.Errorf("Index(0): tokens = %d, Count = %d", tokens, n)
			}
		})
	}
}

// checkHeadings asserts that, outside fenced code, every heading of level
// one to three is the block's own: bodies' headings were demoted and their
// fences closed.
func checkHeadings(t *testing.T, md string) {
	t.Helper()
	var fence byte
	var fenceLen int
	for _, line := range strings.Split(md, "\n") {
		if fence != 0 {
			if closesFence(line, fence, fenceLen) {
				fence = 0
			}
			continue
		}
		if c, n, ok := opensFence(line); ok {
			fence, fenceLen = c, n
			continue
		}
		_, level, _, ok := atxHeading(line)
		if !ok || level > 3 {
			continue
		}
		if line != "# Project memory" && line != "## Facts" && line != "## Procedures" && !strings.HasPrefix(line, "### k") {
			t.Errorf("stray heading %q in:\n%s", line, md)
		}
	}
	if fence != 0 {
		t.Errorf("block ends inside a fence:\n%s", md)
	}
}

// checkRelevantFirst asserts that within each section the relevant records
// come first, in relevance order.
func checkRelevantFirst(t *testing.T, included []string, recs []memory.Record, relevant []string) {
	t.Helper()
	rank := map[string]int{}
	for i, id := range relevant {
		if _, ok := rank[id]; !ok {
			rank[id] = i
		}
	}
	typ := map[string]memory.Type{}
	for _, r := range recs {
		typ[r.ID] = r.Type
	}
	last := map[memory.Type]int{} // rank of the previous record shown, per section
	for _, id := range included {
		p, ok := rank[id]
		if !ok {
			p = len(relevant) // after every relevant one
		}
		if q, seen := last[typ[id]]; seen && p < q {
			t.Errorf("included %v not in relevance order %v", included, relevant)
			return
		}
		last[typ[id]] = p
	}
}
