package weave

import (
	"fmt"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// TestIndexCappedKeepsWhatIsWorthReading: a capped index lists procedures
// first, then facts in the order a recall offers them, and says how many
// it left out; keys play no part in what is kept.
func TestIndexCappedKeepsWhatIsWorthReading(t *testing.T) {
	var recs []memory.Record
	for i := range 150 {
		recs = append(recs, memory.Record{ID: fmt.Sprintf("f%03d", i), Scope: scope.Project, Type: memory.Semantic,
			Key: fmt.Sprintf("fact-%d", i), Description: "A fact", Confidence: 0.5, UpdatedAt: at(1)})
	}
	recs = append(recs,
		memory.Record{ID: "w", Scope: scope.Project, Type: memory.Working, Key: "aaa-scratch", Description: "Scratch", Confidence: 1, UseCount: 99, UpdatedAt: at(9)},
		memory.Record{ID: "e", Scope: scope.Project, Type: memory.Episodic, Key: "aaa-session", Description: "A session", Confidence: 1, UseCount: 99, UpdatedAt: at(9)},
		memory.Record{ID: "u", Scope: scope.Project, Type: memory.Semantic, Key: "used", Description: "Used often", Confidence: 0.5, UseCount: 7, UpdatedAt: at(1)},
		memory.Record{ID: "n", Scope: scope.Project, Type: memory.Semantic, Key: "newer", Description: "Changed lately", Confidence: 0.5, UpdatedAt: at(5)},
		memory.Record{ID: "t", Scope: scope.Project, Type: memory.Semantic, Key: "test-runner", Description: "How tests run", Confidence: 0.9, UpdatedAt: at(1)},
		memory.Record{ID: "r", Scope: scope.Project, Type: memory.Procedural, Key: "release-steps", Description: "Cut a release", UseCount: 1, UpdatedAt: at(1)},
	)
	md, tokens := shared.Index(recs, 120, 0)
	if tokens > 120 || tokens != shared.Count(md) {
		t.Fatalf("tokens = %d, Count = %d, cap 120", tokens, shared.Count(md))
	}
	var keys []string
	for _, line := range strings.Split(md, "\n") {
		if f := strings.Split(line, " | "); len(f) == 4 && strings.HasPrefix(line, "| ") && f[0] != "| key" {
			keys = append(keys, strings.TrimPrefix(f[0], "| "))
		}
	}
	want := []string{"release-steps", "test-runner", "used", "newer", "fact-0"}
	if len(keys) < len(want) || strings.Join(keys[:len(want)], " ") != strings.Join(want, " ") {
		t.Fatalf("rows %v, want them to start %v:\n%s", keys, want, md)
	}
	if more := fmt.Sprintf("\n_… and %d more: read memory://index._\n", len(recs)-len(keys)); !strings.HasSuffix(md, more) {
		t.Errorf("want the ending %q:\n%s", more, md)
	}
}
