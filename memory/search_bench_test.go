package memory

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
)

// BenchmarkSearchSizes is BenchmarkSearch at the sizes the search engine
// is held to: 5,000 and 20,000 records, and 100,000 without -short. The
// first search of a run loads the index and is not timed. Besides the wall
// clock it reports the process's CPU time per search (cpu-ns/op, garbage
// collection included), steadier on a machine others share.
func BenchmarkSearchSizes(b *testing.B) {
	for _, n := range []int{5_000, 20_000, 100_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			if testing.Short() && n > 20_000 {
				b.Skip("-short: skipping the largest size")
			}
			s := openBench(b, n)
			qs := queries(benchSeed+2, 64)
			measure(b, func(ctx context.Context, i int) error {
				_, err := s.Search(ctx, benchProjects[0].ID, SearchOptions{Query: qs[i%len(qs)]})
				return err
			})
		})
	}
}

// BenchmarkSearchFresh is BenchmarkSearchSizes with a query never asked
// before at every search, and, as cold, with no cards of hits kept from
// earlier searches: each hit's row is read.
func BenchmarkSearchFresh(b *testing.B) {
	for _, n := range []int{5_000, 20_000} {
		for _, cold := range []bool{false, true} {
			name := "n=" + strconv.Itoa(n)
			if cold {
				name += "/cold"
			}
			b.Run(name, func(b *testing.B) {
				s := openBench(b, n)
				qs := queries(benchSeed+3, b.N+1)
				measure(b, func(ctx context.Context, i int) error {
					if cold {
						h := &s.search.cards
						h.mu.Lock()
						h.cards = nil
						h.mu.Unlock()
					}
					_, err := s.Search(ctx, benchProjects[0].ID, SearchOptions{Query: qs[i%len(qs)]})
					return err
				})
			})
		}
	}
}

// BenchmarkSearchRecall is the search recall with a query runs: the 40
// best semantic and procedural records, read whole, without previews.
func BenchmarkSearchRecall(b *testing.B) {
	for _, n := range []int{5_000, 20_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			s := openBench(b, n)
			qs := queries(benchSeed+2, 64)
			b.ReportAllocs()
			measure(b, func(ctx context.Context, i int) error {
				_, err := s.Search(ctx, benchProjects[0].ID, SearchOptions{Query: qs[i%len(qs)], Types: []Type{Semantic, Procedural},
					Limit: 40, Bodies: true, NoPreview: true})
				return err
			})
		})
	}
}

// BenchmarkSearchLoad loads the search index of a project and the shared
// bucket from scratch, as a process's first search does, and reports the
// heap it keeps, in all and per record loaded. A load takes most of a second at 20,000 records; -short
// skips that size.
func BenchmarkSearchLoad(b *testing.B) {
	for _, n := range []int{5_000, 20_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			if testing.Short() && n > 5_000 {
				b.Skip("-short: skipping the larger size")
			}
			s := openBench(b, n)
			var before, after runtime.MemStats
			for i := range b.N {
				s.search.buckets = nil
				if i == b.N-1 {
					runtime.GC()
					runtime.ReadMemStats(&before)
				}
				if _, err := s.Search(context.Background(), benchProjects[0].ID, SearchOptions{Query: "test deploy"}); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			kept := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			b.ReportMetric(kept/(1<<20), "MiB-kept")
			docs := 0
			for _, bk := range s.search.buckets {
				docs += bk.part.Len()
			}
			b.ReportMetric(kept/float64(docs), "B/record")
		})
	}
}

// queries returns n natural-language queries of the corpus of seed.
func queries(seed int64, n int) []string {
	c := corpus.New(seed)
	qs := make([]string, n)
	for i := range qs {
		qs[i] = c.Query()
	}
	return qs
}
