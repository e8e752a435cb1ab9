package memory

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
	"prom.codes/memory-mcp/scope"
)

// BenchmarkOpenFresh opens a database that does not exist yet: the file,
// WAL, every migration.
func BenchmarkOpenFresh(b *testing.B) {
	dir := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		s, err := openTarget(context.Background(), filepath.Join(dir, strconv.Itoa(i), "memory.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkOpenExisting opens a database at the current schema.
func BenchmarkOpenExisting(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		path := benchDB(b, n)
		b.ResetTimer()
		for range b.N {
			s, err := openTarget(context.Background(), path, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			s.Close()
			b.StartTimer()
		}
	})
}

// BenchmarkGetThenList reads a record by key, then lists: the list writes
// the read's use first.
func BenchmarkGetThenList(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBenchCopy(b, n)
		idx := picks(n)
		measure(b, func(ctx context.Context, i int) error {
			p, _, t, key := benchName(idx[i%len(idx)])
			if _, err := s.Get(ctx, p.ID, Selector{Key: key, Type: t}); err != nil {
				return err
			}
			_, _, err := s.List(ctx, p.ID, ListOptions{Limit: 20})
			return err
		})
	})
}

// BenchmarkPutConcurrentStores writes new records from 8 Stores on one
// database at once, as 8 server processes would: b.N writes in all, spread
// over them. ns/op is wall time per write of all of them together.
func BenchmarkPutConcurrentStores(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		first := openBenchCopy(b, n)
		const procs = 8
		stores := []*Store{first}
		for range procs - 1 {
			s, err := openTarget(context.Background(), first.Path(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			stores = append(stores, s)
		}
		c := corpus.New(benchSeed + 2)
		ws := make([]Write, b.N)
		for i := range ws {
			_, w := benchWrite(c, n+i)
			w.Scope, w.Type, w.Key = scope.Project, Working, fmt.Sprintf("concurrent-%d", i)
			w.Source = FromTool
			ws[i] = w
		}
		b.ResetTimer()
		var wg sync.WaitGroup
		errs := make(chan error, procs)
		for p, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := p; i < len(ws); i += procs {
					if _, _, err := s.Put(context.Background(), benchProjects[0], ws[i]); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	})
}
