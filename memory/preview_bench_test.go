package memory

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"prom.codes/memory-mcp/memory/excerpt"
	"prom.codes/memory-mcp/memory/index"
)

// BenchmarkPreview builds the excerpt of one hit whose body is about 2 KB,
// its match near the end.
func BenchmarkPreview(b *testing.B) {
	body := strings.Repeat("Run the fixtures before the suite; the database is reset between packages. ", 25) + "The integration tests need Docker."
	r := Record{Body: body}
	terms := []string{"integr", "test"}
	words := map[string]string{"integr": "integration", "test": "tests"}
	b.ReportAllocs()
	for b.Loop() {
		if p := preview(r, terms, words); !strings.Contains(p, "integration") {
			b.Fatalf("preview %q", p)
		}
	}
}

// TestPreviewFindsWordsInAnyCase: the excerpt starts near the first match of
// a query word whatever its case in the body, for ASCII and other words.
func TestPreviewFindsWordsInAnyCase(t *testing.T) {
	pad := strings.Repeat("filler words that match nothing at all. ", 10)
	for _, tc := range []struct{ body, term, word, want string }{
		{pad + "The INTEGRATION Tests need Docker.", "integr", "integration", "INTEGRATION Tests"},
		{pad + "Die Prüfung ÜBER alles.", "uber", "über", "ÜBER alles"},
		{pad + "run make test", "test", "TEST", "make test"},
	} {
		p := preview(Record{Body: tc.body}, []string{tc.term}, map[string]string{tc.term: tc.word})
		if !strings.Contains(p, tc.want) || !strings.HasPrefix(p, "...") {
			t.Errorf("preview of %q for %q: %q", tc.body[len(pad):], tc.word, p)
		}
	}
}

// TestExcerptOfStart: an excerpt built from the start of a text, when it
// says it is settled, is the excerpt of the whole text, for random texts,
// words and cuts, ASCII and not.
func TestExcerptOfStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vocab := []string{"test", "tests", "Tests", "DB", "über", "Über", "a", "integration", "x", "fixtures", "\u3000", "  ", "\n", "é"}
	checked, settled := 0, 0
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for range rng.IntN(120) {
			b.WriteString(vocab[rng.IntN(len(vocab))])
			if rng.IntN(4) > 0 {
				b.WriteByte(' ')
			}
		}
		text := b.String()
		var terms []string
		words := map[string]string{}
		for range rng.IntN(3) {
			w := vocab[rng.IntN(len(vocab))]
			term := strings.ToLower(strings.TrimSpace(w))
			if term == "" {
				continue
			}
			terms = append(terms, term)
			words[term] = w
		}
		whole, ok := excerpt.Of(text, false, terms, words)
		if !ok {
			t.Fatalf("excerpt of a whole text is not settled")
		}
		for cut := 0; cut <= len(text); cut += 1 + rng.IntN(16) {
			if !utf8.ValidString(text[:cut]) {
				continue
			}
			checked++
			got, ok := excerpt.Of(text[:cut], cut < len(text), terms, words)
			if !ok {
				continue
			}
			settled++
			if got != whole {
				t.Fatalf("excerpt of %q cut at %d for %q: %q, of the whole: %q", text, cut, terms, got, whole)
			}
		}
	}
	if settled == 0 || settled == checked {
		t.Fatalf("%d of %d cuts settled: the test checks nothing", settled, checked)
	}
}

// TestExcerptWordsAsFields: the excerpt's words are strings.Fields', on
// random text of ASCII and Unicode spaces, other letters and broken UTF-8.
func TestExcerptWordsAsFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "Z", " ", "\t", "\n", "\v", "\f", "\r", "\u0085", "\u00a0", "\u3000", "\u2028", "é", "語", "\xff", "\xe3\x80", "."}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(16) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		var got []string
		for rest := s; ; {
			rest = rest[index.SpaceLen(rest):]
			if rest == "" {
				break
			}
			end := index.SpaceAt(rest)
			got = append(got, rest[:end])
			rest = rest[end:]
		}
		if want := strings.Fields(s); !slices.Equal(got, want) {
			t.Fatalf("words of %q: %q, want %q", s, got, want)
		}
	}
}
