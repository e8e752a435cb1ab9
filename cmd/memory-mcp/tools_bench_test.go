package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// These benchmarks measure one tool call through the whole server (the
// SDK's decoding, validation and encoding, the middleware, the mirror
// sync, the store) with an in-process client, so that a profile shows the
// server's share of a call without the pipe and the client process.

// benchSession serves a on in-memory transports and returns the client.
func benchSession(b *testing.B, a *app) *mcp.ClientSession {
	b.Helper()
	srv := server.New(a.App, slog.New(slog.DiscardHandler))
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func benchCall(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: %v", tool, res.Content)
	}
	return nil
}

// benchToolSizes are the fixtures the tool benchmarks run on: records and
// how many of them are mirrored project facts.
var benchToolSizes = [][2]int{{1_000, 200}, {10_000, 1_000}}

func eachToolSize(b *testing.B, fn func(b *testing.B, f *benchFixture)) {
	for _, sz := range benchToolSizes {
		b.Run("n="+strconv.Itoa(sz[0]), func(b *testing.B) { fn(b, fixture(b, sz[0], sz[1])) })
	}
}

// BenchmarkToolWrite stores a new project fact: sync, validation, secret
// scan, one transaction, its markdown file.
func BenchmarkToolWrite(b *testing.B) {
	eachToolSize(b, func(b *testing.B, f *benchFixture) {
		cs := benchSession(b, f.app(b))
		c := corpus.New(benchSeed + 3)
		i := 0
		// The fixture's workspace is shared: the files written here must
		// not be there for the next run to import.
		b.Cleanup(func() {
			for j := 1; j <= i; j++ {
				os.Remove(filepath.Join(f.root, ".prometheus", "memories", fmt.Sprintf("bench-fact-%d.md", j)))
			}
		})
		benchMeasure(b, func(ctx context.Context) error {
			i++
			return benchCall(ctx, cs, "memory_write", map[string]any{"type": "semantic", "key": fmt.Sprintf("bench-fact-%d", i),
				"body": c.Text(30), "description": c.Description(), "tags": c.Tags()})
		})
	})
}

// BenchmarkToolWriteNote stores a working note: no markdown file.
func BenchmarkToolWriteNote(b *testing.B) {
	eachToolSize(b, func(b *testing.B, f *benchFixture) {
		cs := benchSession(b, f.app(b))
		c := corpus.New(benchSeed + 4)
		i := 0
		benchMeasure(b, func(ctx context.Context) error {
			i++
			return benchCall(ctx, cs, "memory_write", map[string]any{"type": "working", "key": fmt.Sprintf("bench-note-%d", i),
				"body": c.Text(30), "description": c.Description(), "tags": c.Tags()})
		})
	})
}

// BenchmarkToolReadKey reads a record by key: sync, resolution, the use
// counted in memory.
func BenchmarkToolReadKey(b *testing.B) {
	eachToolSize(b, func(b *testing.B, f *benchFixture) {
		a := f.app(b)
		cs := benchSession(b, a)
		recs, err := a.Store.Index(context.Background(), a.cfg.Project, 512)
		if err != nil || len(recs) == 0 {
			b.Fatalf("index: %d records, %v", len(recs), err)
		}
		i := 0
		benchMeasure(b, func(ctx context.Context) error {
			i++
			r := recs[i%len(recs)]
			return benchCall(ctx, cs, "memory_read", map[string]any{"key": r.Key, "type": string(r.Type)})
		})
	})
}
