package eval

import (
	"path/filepath"
	"testing"

	"prom.codes/memory-mcp/memory/index"
)

// TestHolders checks the count that decides whether keywords name their
// record: records holding every word, in any field, case folded, each
// record once however often it repeats a word.
func TestHolders(t *testing.T) {
	var h holders
	h.add("deploy canary", "The canary deploy.", "canary canary rollout")
	h.add("other", "Rollout of the canary.", "")
	h.add("third", "", "deploy. Canary")
	for q, want := range map[string]int{
		"canary":         3,
		"canary deploy":  2,
		"canary rollout": 2,
		"deploy rollout": 1,
		"missing canary": 0,
		"":               0,
	} {
		if got := h.count(q); got != want {
			t.Errorf("count(%q) = %d, want %d", q, got, want)
		}
	}
}

// TestSessionSet checks that the dated sessions load, that every kind of
// question is asked, that each question's ceiling is a share, and that
// the engine scores every question.
func TestSessionSet(t *testing.T) {
	turns, qs, err := loadSessions(filepath.Join("..", "..", "..", "..", "testdata", "eval", "conversations", "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, q := range qs {
		kinds[q.kind]++
		if len(q.evidence) == 0 {
			t.Errorf("%q has no evidence", q.question)
		}
		if c := reachable(turns, q); c < 0 || c > 1 {
			t.Errorf("%q: ceiling %v", q.question, c)
		}
	}
	for _, k := range sessionKinds {
		if kinds[k] == 0 {
			t.Errorf("no question of kind %s", k)
		}
	}
	if len(kinds) != len(sessionKinds) {
		t.Errorf("kinds %v, want only %v", kinds, sessionKinds)
	}
	var docs []evalDoc
	for _, tr := range turns {
		if tr.created.IsZero() {
			t.Fatalf("%s %s has no date", tr.conv, tr.key)
		}
		docs = append(docs, evalDoc{tr.conv, tr.key, [index.NumFields]string{tr.key, "", tr.text, ""}, tr.created})
	}
	sc := scoreEngineSessions(docs, qs, variants()[0])
	if sc.n != len(qs) || sc.r5 <= 0 || sc.r5 > sc.r10 || sc.mrr <= 0 {
		t.Errorf("scores %+v over %d questions", sc, len(qs))
	}
}
