package main

import (
	"context"
	"io"

	"prom.codes/memory-mcp/cmd/memory-bench/internal/eval"
	"prom.codes/memory-mcp/memory"
)

// runEval measures search quality (see package eval) on the labelled sets
// and on known items of the benchmark's generated records.
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
	return eval.Run(ctx, eval.Config{Dir: cfg.evalDir, Sizes: cfg.evalSizes, Seed: cfg.seed, Corpus: corpus}, stdout, stderr)
}
