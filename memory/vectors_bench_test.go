package memory

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"prom.codes/memory-mcp/scope"
)

func randomVector(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return unit(v)
}

// BenchmarkVectorNearest is the brute-force scan itself: int8 vectors in
// memory, 70% of them visible to the caller, the best 60 kept.
func BenchmarkVectorNearest(b *testing.B) {
	for _, dims := range []int{384, 768} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("vectors=%d/dims=%d", n, dims), func(b *testing.B) {
				r := rand.New(rand.NewSource(1))
				var x vectorIndex
				x.reset("m", dims)
				mine, other := string(scope.IdentityOf("/work/a")), string(scope.IdentityOf("/work/b"))
				for i := range n {
					bucket := mine
					if i%10 < 3 {
						bucket = other
					}
					x.add(int64(i+1), bucket, 0, randomVector(r, dims))
				}
				q := randomVector(r, dims)
				keys := visibleBuckets(scope.Identity(mine))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if got := x.nearest(q, keys, scope.Workspace, 60); len(got) != 60 {
						b.Fatalf("%d neighbours", len(got))
					}
				}
			})
		}
	}
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
		put(b, s, p, Write{Scope: scope.Project, Type: Semantic, Key: fmt.Sprintf("fact-%d", i), Body: fmt.Sprintf("fact number %d about things", i)})
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
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		hits, err := s.SemanticSearch(ctx, projA.ID, SearchOptions{Query: "things", Limit: 10}, "m", q)
		if err != nil || len(hits) != 10 {
			b.Fatalf("%d hits, %v", len(hits), err)
		}
	}
}
