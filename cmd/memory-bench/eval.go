package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"prom.codes/memory-mcp/cmd/memory-bench/internal/eval"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/memory/embed/embedtest"
)

// runEval measures search quality (see package eval) on the labelled sets
// and on known items of the benchmark's generated records, the known items
// through the store and through the real server over stdio.
func runEval(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	corpus := func(n int) []eval.Record {
		c := newRecords(cfg.seed, 0)
		recs := make([]eval.Record, n)
		for i := range recs {
			other, lvl, t, key := c.name(i)
			w := memory.Write{Scope: lvl, Type: t, Key: key, Description: c.Description(), Body: c.body(t), Tags: c.Tags()}
			recs[i] = eval.Record{Other: other, Write: w}
		}
		return recs
	}
	ecfg := eval.Config{Dir: cfg.evalDir, Sizes: cfg.evalSizes, Seed: cfg.seed, Corpus: corpus}
	e, name, stop, err := evalEndpoint()
	if err != nil {
		return err
	}
	defer stop()
	ecfg.Embed, ecfg.EmbedName = e, name
	if !cfg.evalStoreOnly {
		tmp, err := os.MkdirTemp("", "memory-bench-eval-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin, err := findServer(ctx, cfg.server, tmp, stderr)
		if err != nil {
			return err
		}
		ecfg.Serve = func(ctx context.Context, dbPath, root string) (eval.Searcher, error) {
			env := []string{
				"HOME=" + filepath.Join(filepath.Dir(dbPath), "home"), "PATH=" + os.Getenv("PATH"),
				"PROMETHEUS_MEMORY_DB_PATH=" + dbPath, "PROMETHEUS_WORKSPACE_ROOT=" + root,
			}
			s, _, err := launch(ctx, bin, env, root)
			if err != nil {
				return nil, err
			}
			return mcpSearcher{s}, nil
		}
	}
	return eval.Run(ctx, ecfg, stdout, stderr)
}

// evalEndpoint is the embeddings endpoint hybrid search is evaluated
// with: a real one when MEMORY_MCP_TEST_EMBEDDINGS_URL names it (with
// _MODEL, default nomic-embed-text, and _KEY), as for the tests, else the
// tests' deterministic stand-in on loopback.
func evalEndpoint() (*embed.Client, string, func(), error) {
	url, model := os.Getenv("MEMORY_MCP_TEST_EMBEDDINGS_URL"), os.Getenv("MEMORY_MCP_TEST_EMBEDDINGS_MODEL")
	if url == "" {
		srv, err := embedtest.Start()
		if err != nil {
			return nil, "", nil, err
		}
		c, err := embed.New(embed.Config{URL: srv.URL, Model: "toy"})
		if err != nil {
			srv.Close()
			return nil, "", nil, err
		}
		return c, "the tests' stand-in endpoint (memory/embed/embedtest: eight groups of synonyms, other words hashed)", srv.Close, nil
	}
	if model == "" {
		model = "nomic-embed-text"
	}
	c, err := embed.New(embed.Config{URL: url, Model: model, Key: os.Getenv("MEMORY_MCP_TEST_EMBEDDINGS_KEY")})
	if err != nil {
		return nil, "", nil, err
	}
	return c, fmt.Sprintf("model %s at %s", c.Model(), c.Endpoint()), func() {}, nil
}

// mcpSearcher searches with the server's memory_search tool.
type mcpSearcher struct{ s *session }

func (m mcpSearcher) Search(ctx context.Context, query string, limit int) ([]string, error) {
	res, err := m.s.result(ctx, "memory_search", map[string]any{"query": query, "limit": limit})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []struct{ Key string }
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("memory_search result: %w", err)
	}
	keys := make([]string, len(out.Results))
	for i, r := range out.Results {
		keys[i] = r.Key
	}
	return keys, nil
}

func (m mcpSearcher) Close() error { return m.s.close() }
