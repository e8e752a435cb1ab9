package weave

import (
	"math/rand"
	"strings"
	"testing"
)

// longRuns are 64 KiB bodies of one character class each, the input on
// which tiktoken's byte-pair merge is quadratic.
var longRuns = map[string]string{
	"letter":     strings.Repeat("a", 64<<10),
	"cjk":        strings.Repeat("漢", 64<<10/3),
	"space":      strings.Repeat(" ", 64<<10),
	"newline":    strings.Repeat("\n", 64<<10),
	"digit":      strings.Repeat("7", 64<<10),
	"punct":      strings.Repeat("=", 64<<10),
	"mixedspace": strings.Repeat(" \t", 32<<10),
}

// BenchmarkCountLongRun counts 64 KiB of one character class.
func BenchmarkCountLongRun(b *testing.B) {
	shared.Preload()
	for _, name := range []string{"letter", "cjk", "space", "newline", "digit", "punct", "mixedspace"} {
		s := longRuns[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				shared.Count(s)
			}
		})
	}
}

// BenchmarkWeaveLongRun weaves one record whose body is 64 KiB of one
// character class with a fresh Weaver, so nothing is cached.
func BenchmarkWeaveLongRun(b *testing.B) {
	shared.Preload()
	for _, name := range []string{"letter", "cjk", "space"} {
		recs := benchRecords(3)
		recs[0].Body = longRuns[name]
		recs[0].Confidence = 1
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				New().Weave(recs, Options{MaxTokens: 100_000})
			}
		})
	}
}

// exact is tiktoken-go's count of the whole of s.
func exact(t testing.TB, s string) int {
	t.Helper()
	return referenceCount(t, s)
}

// TestCountExactOnBodies checks that Count is exact on random record
// bodies.
func TestCountExactOnBodies(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for i := range 200 {
		s := randBody(r)
		if got, want := shared.Count(s), exact(t, s); got != want {
			t.Fatalf("body %d: Count = %d, exact %d\n%q", i, got, want, s)
		}
	}
}

// TestWeaveLongRunsKeepTheCap weaves records with long one-class bodies
// under many budgets: by tiktoken-go's count of the whole block, the block
// is within its budget and no larger than reported.
func TestWeaveLongRunsKeepTheCap(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	names := []string{"letter", "cjk", "space", "newline", "digit", "punct", "mixedspace"}
	for i := range 20 {
		recs := randRecords(r, 6)
		eligible := 0
		for j := range recs {
			run := []rune(longRuns[names[(i+j)%len(names)]])
			recs[j].Body = "Start " + string(run[:300+r.Intn(3000)]) + " end.\n" + recs[j].Body
			if recs[j].Type == "semantic" || recs[j].Type == "procedural" {
				eligible++
			}
		}
		for _, budget := range []int{40, 300, 1500, 5000} {
			b := shared.Weave(recs, Options{MaxTokens: budget})
			if real := exact(t, b.Markdown); real > b.Tokens || b.Tokens > budget {
				t.Errorf("case %d, budget %d: Tokens %d, the real count %d", i, budget, b.Tokens, real)
			}
			if b.Omitted+len(b.Included) != eligible {
				t.Errorf("case %d, budget %d: Omitted %d + Included %d != eligible %d", i, budget, b.Omitted, len(b.Included), eligible)
			}
		}
	}
}

// TestWeaveRunsNeverOverBudget weaves a record whose body, counted in cut
// pieces without a margin, came out 7 tokens short, and the block went 7
// over its budget by the real encoding.
func TestWeaveRunsNeverOverBudget(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, body := range []string{"x" + strings.Repeat("ab", 1000), strings.Repeat("\n", 600) + "end", "x" + strings.Repeat("ab", 300)} {
		recs := randRecords(r, 1)
		recs[0].Type, recs[0].Body = "semantic", body
		for budget := 40; budget <= 1100; budget += 7 {
			b := shared.Weave(recs, Options{MaxTokens: budget})
			if real := exact(t, b.Markdown); real > budget || real > b.Tokens {
				t.Fatalf("budget %d: block of %d tokens by the encoding, %d reported", budget, real, b.Tokens)
			}
		}
	}
}
