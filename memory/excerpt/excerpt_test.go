package excerpt

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// An excerpt of the start of a text that says it is the whole text's
// excerpt is exactly the excerpt of the whole text, for texts of words,
// spaces of every kind and characters of several bytes, cut anywhere on a
// character's start.
func TestExcerptOfStartIsTheWholeOnes(t *testing.T) {
	pieces := []string{"alpha", "Beta", "gamma", "delta", "ÉCOLE", "école", "naïve", "日本語", "x", "test", "tests", "TeSt",
		" ", " ", "  ", "\t", "\n", "\u00a0", "\u2003", "\u3000", ".", ",", "longwordwithoutanyspacesatallinthemiddleofit"}
	termSets := [][]string{nil, {"test"}, {"gamma"}, {"beta", "delta"}, {"zzz"}, {"école"}, {"alpha", "tests"}}
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for range 20000 {
		var b strings.Builder
		for range r.IntN(120) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		text := b.String()
		terms := termSets[r.IntN(len(termSets))]
		words := map[string]string{}
		for _, t := range terms {
			words[t] = t
		}
		whole, _ := Of(text, false, terms, words)
		n := r.IntN(len(text) + 1)
		for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
			n--
		}
		got, ok := Of(text[:n], n < len(text), terms, words)
		if !ok {
			continue
		}
		checked++
		if got != whole {
			t.Fatalf("text %q cut at %d, terms %q:\nstart gives %q\nwhole gives %q", text, n, terms, got, whole)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d excerpts of a start were taken for the whole's", checked)
	}
}

// TestIndexFoldASCII holds the excerpt's search for ASCII words to a search
// in a lower-cased copy of the body, on many random texts and words.
func TestIndexFoldASCII(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "aAbBtTiI -\\n"
	for n := 0; n < 20000; n++ {
		s := make([]byte, rng.IntN(40))
		for i := range s {
			s[i] = alphabet[rng.IntN(len(alphabet))]
		}
		p := make([]byte, 1+rng.IntN(4))
		for i := range p {
			p[i] = "abti -"[rng.IntN(6)]
		}
		if got, want := indexFoldASCII(string(s), string(p)), strings.Index(strings.ToLower(string(s)), string(p)); got != want {
			t.Fatalf("indexFoldASCII(%q, %q) = %d, want %d", s, p, got, want)
		}
	}
	if got := indexFoldASCII("abc", ""); got != 0 {
		t.Fatalf("empty probe: %d", got)
	}
}
