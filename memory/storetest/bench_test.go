package storetest_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/scope"
)

var benchWords = []string{"deploy", "release", "database", "kafka", "terraform", "review", "lint", "cache", "index", "token",
	"replica", "backup", "pipeline", "schema", "query", "latency", "budget", "profile", "tenant", "session"}

func benchBody(i int) string {
	return fmt.Sprintf("Record %d is about %s and %s, with a note on %s.", i,
		benchWords[i%len(benchWords)], benchWords[(i/7)%len(benchWords)], benchWords[(i/31)%len(benchWords)])
}

// benchStores gives each backend's store holding n records.
func benchStores(b *testing.B, n int, fn func(b *testing.B, s *memory.Store, p memory.Project)) {
	backends := []struct {
		name string
		db   func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return b.TempDir() + "/memory.db" }},
		{"postgres", func(b *testing.B) string { return storetest.NewPostgres(b) }},
	}
	for _, be := range backends {
		b.Run(fmt.Sprintf("%s/%d", be.name, n), func(b *testing.B) {
			if be.name == "postgres" && os.Getenv(storetest.PostgresEnv) == "" {
				b.Skip("no PostgreSQL")
			}
			s := storetest.Open(b, be.db(b), nil)
			p := memory.Project{ID: scope.IdentityOf("/bench")}
			for i := range n {
				if _, _, err := s.Put(context.Background(), p, memory.Write{Scope: scope.Project, Type: memory.Semantic,
					Key: fmt.Sprintf("rec-%06d", i), Body: benchBody(i)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			fn(b, s, p)
		})
	}
}

func BenchmarkStorePut(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		benchStores(b, n, func(b *testing.B, s *memory.Store, p memory.Project) {
			for i := 0; b.Loop(); i++ {
				if _, _, err := s.Put(context.Background(), p, memory.Write{Scope: scope.Project, Type: memory.Semantic,
					Key: fmt.Sprintf("new-%07d", i), Body: benchBody(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStoreGet(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		benchStores(b, n, func(b *testing.B, s *memory.Store, p memory.Project) {
			for i := 0; b.Loop(); i++ {
				if _, err := s.Get(context.Background(), p.ID, memory.Selector{Key: fmt.Sprintf("rec-%06d", i%n)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStoreSearch(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		benchStores(b, n, func(b *testing.B, s *memory.Store, p memory.Project) {
			for i := 0; b.Loop(); i++ {
				q := benchWords[i%len(benchWords)] + " " + benchWords[(i+3)%len(benchWords)]
				if _, err := s.Search(context.Background(), p.ID, memory.SearchOptions{Query: q}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
