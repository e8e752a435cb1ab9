package corpus

import (
	"strings"
	"testing"
)

// The benchmarks name record i by TermAt alone, in corpora of different
// seeds, so the vocabulary must not depend on the seed; its words are
// distinct, so TermAt never gives a stop-word.
func TestVocabulary(t *testing.T) {
	if len(vocab) != vocabSize {
		t.Fatalf("vocabulary has %d words, want %d", len(vocab), vocabSize)
	}
	seen := map[string]bool{}
	for _, w := range vocab {
		if seen[w] {
			t.Errorf("%q twice", w)
		}
		seen[w] = true
	}
	again, _ := newVocab()
	if strings.Join(again, " ") != strings.Join(vocab, " ") {
		t.Error("a second vocabulary differs from the first")
	}
	if got := TermAt(0); got != "test" {
		t.Errorf("TermAt(0) = %q, want the commonest searchable word, test", got)
	}
	if a, b := TermAt(0), TermAt(uint64(len(vocab)-stops)); a != b {
		t.Errorf("TermAt does not count round: %q, then %q", a, b)
	}
}

func TestSameSeedSameText(t *testing.T) {
	write := func(seed int64) string {
		c := New(seed)
		return c.Text(50) + c.Steps(40) + c.Description() + strings.Join(c.Tags(), ",") + c.Query()
	}
	if a, b := write(1), write(1); a != b {
		t.Errorf("seed 1 wrote two texts:\n%s\n%s", a, b)
	}
	if a, b := write(1), write(2); a == b {
		t.Error("seeds 1 and 2 wrote the same text")
	}
}

func TestQuery(t *testing.T) {
	c := New(1)
	fillers := map[string]bool{}
	for _, w := range queryFillers {
		fillers[w] = true
	}
	for range 100 {
		q := c.Query()
		words := strings.Fields(q)
		if strings.Join(words[:3], " ") != "how do we" {
			t.Fatalf("%q does not start with how do we", q)
		}
		n := 0
		for _, w := range words[3:] {
			if !fillers[w] {
				n++
			}
		}
		if n < 4 || n > 6 {
			t.Errorf("%q has %d searchable words, want 4 to 6", q, n)
		}
	}
}
