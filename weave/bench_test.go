package weave

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// benchRecords makes n records shaped like real ones: mostly facts, a body
// of a few dozen to a few hundred tokens, spread-out scores.
func benchRecords(n int) []memory.Record {
	r := rand.New(rand.NewSource(int64(n)))
	recs := make([]memory.Record, n)
	for i := range recs {
		typ := memory.Semantic
		if i%4 == 0 {
			typ = memory.Procedural
		}
		recs[i] = memory.Record{
			ID:          fmt.Sprintf("01J%08d", i),
			Scope:       scope.Levels[i%len(scope.Levels)],
			Type:        typ,
			Key:         fmt.Sprintf("key-%d", i),
			Description: "A remembered fact about how this project is built",
			Body:        "## Detail\n" + strings.Repeat(fmt.Sprintf("Fact %d: run `make test` before pushing; CI is slow. ", i), 2+r.Intn(10)),
			Confidence:  r.Float64(),
			UseCount:    int64(r.Intn(50)),
			UpdatedAt:   t0.Add(time.Duration(r.Intn(1e6)) * time.Second),
		}
	}
	return recs
}

// BenchmarkWeave weaves a default-budget block; the encoding is loaded and
// the section counts cached before timing, as in a running server.
func BenchmarkWeave(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			recs := benchRecords(n)
			w := New()
			w.Preload()
			w.Weave(recs, Options{})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w.Weave(recs, Options{})
			}
		})
	}
}

// BenchmarkWeaveCold is a first weave: every section packed is tokenized.
func BenchmarkWeaveCold(b *testing.B) {
	recs := benchRecords(10_000)
	shared.Preload()
	b.ReportAllocs()
	for b.Loop() {
		New().Weave(recs, Options{})
	}
}

// BenchmarkIndex renders the uncapped index, and the capped one that goes
// into the server's instructions.
func BenchmarkIndex(b *testing.B) {
	recs := benchRecords(10_000)
	for _, limit := range []int{0, 1500} {
		b.Run(fmt.Sprint("max=", limit), func(b *testing.B) {
			w := New()
			w.Index(recs, limit, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w.Index(recs, limit, 0)
			}
		})
	}
}

// BenchmarkCount tokenizes a block-sized text of about 1,500 tokens.
func BenchmarkCount(b *testing.B) {
	s := strings.Repeat("Use `make test`; it runs go test -race with the right tags. ", 100)
	shared.Preload()
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		shared.Count(s)
	}
}
