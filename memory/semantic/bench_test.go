package semantic

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/vector"
	"prom.codes/memory-mcp/scope"
)

func randomVector(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return vector.Unit(v)
}

// randomEmbedder gives random unit vectors: the benchmark measures the
// store, not a model.
type randomEmbedder struct {
	r    *rand.Rand
	dims int
}

func (e randomEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = randomVector(e.r, e.dims)
	}
	return out, nil
}

// BenchmarkSemanticSearch is a whole semantic search of a store of 10,000
// embedded records: the scan, reading the rows and judging the scope
// chain and filters.
func BenchmarkSemanticSearch(b *testing.B) {
	const n, dims = 10_000, 768
	s, _ := mustOpen(b)
	for i := range n {
		p := projA
		if i%10 < 3 {
			p = projB
		}
		put(b, s, p, memory.Write{Scope: scope.Project, Type: memory.Semantic, Key: fmt.Sprintf("fact-%d", i), Body: fmt.Sprintf("fact number %d about things", i)})
	}
	e := randomEmbedder{rand.New(rand.NewSource(1)), dims}
	for {
		r, err := s.EmbedPending(ctx, "m", e, 500)
		if err != nil {
			b.Fatal(err)
		}
		if r == (EmbedResult{}) {
			break
		}
	}
	q := randomVector(e.r, dims)
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hits, err := s.SemanticSearch(ctx, projA.ID, memory.SearchOptions{Query: "things", Limit: 10}, "m", q)
			if err != nil || len(hits) != 10 {
				b.Fatalf("%d hits, %v", len(hits), err)
			}
		}
	})
	// A min_score no neighbour reaches: random vectors are nearly
	// orthogonal.
	b.Run("min_score", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hits, err := s.SemanticSearch(ctx, projA.ID, memory.SearchOptions{Query: "things", Limit: 10, MinScore: 0.5}, "m", q)
			if err != nil || len(hits) != 0 {
				b.Fatalf("%d hits, %v", len(hits), err)
			}
		}
	})
}
