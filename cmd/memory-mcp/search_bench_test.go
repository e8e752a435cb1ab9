package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// The search benchmarks split memory_search's cost on the fixture of
// 10,000 records: the tool's handler (the markdown sync, the store's
// search, the result), then the same call through the go-sdk over an
// in-memory transport (JSON on both sides, argument validation, no
// process boundary), then a ping over that transport, the floor of any
// call. What the stdio round trip adds is measured by cmd/memory-bench.

// BenchmarkSearchTool is memory_search's handler below the protocol.
func BenchmarkSearchTool(b *testing.B) {
	b.Run("n="+strconv.Itoa(benchN), func(b *testing.B) {
		f := fixture(b, benchN, benchFiles)
		srv := server.New(f.app(b).App, slog.New(slog.DiscardHandler))
		i := 0
		b.ReportAllocs()
		benchMeasure(b, func(ctx context.Context) error {
			i++
			_, out, err := srv.Search(ctx, server.SearchIn{Query: f.queries[i%len(f.queries)]})
			if err == nil && len(out.Results) == 0 {
				err = fmt.Errorf("no results for %q", f.queries[i%len(f.queries)])
			}
			return err
		})
	})
}

// BenchmarkSearchCall is memory_search through the go-sdk client and
// server, connected in memory; ping is that connection's floor.
func BenchmarkSearchCall(b *testing.B) {
	f := fixture(b, benchN, benchFiles)
	srv := server.New(f.app(b).App, slog.New(slog.DiscardHandler))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	b.Run("search/n="+strconv.Itoa(benchN), func(b *testing.B) {
		i := 0
		b.ReportAllocs()
		benchMeasure(b, func(ctx context.Context) error {
			i++
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_search", Arguments: map[string]any{"query": f.queries[i%len(f.queries)]}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %v", res.Content)
			}
			return err
		})
	})
	b.Run("ping", func(b *testing.B) {
		b.ReportAllocs()
		benchMeasure(b, func(ctx context.Context) error { return cs.Ping(ctx, nil) })
	})
}
