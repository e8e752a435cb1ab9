package main

import "testing"

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
