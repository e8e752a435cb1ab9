package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/scope"
)

// randomModel stands in for an embeddings model: random unit vectors. The
// vector search's cost depends on the count and length of the vectors,
// not on what they mean.
type randomModel struct {
	r    *rand.Rand
	dims int
}

func (m randomModel) vector() []float32 {
	v := make([]float32, m.dims)
	var n float64
	for i := range v {
		x := m.r.NormFloat64()
		v[i] = float32(x)
		n += x * x
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

func (m randomModel) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = m.vector()
	}
	return out, nil
}

// vectorRow is one size's measurements.
type vectorRow struct {
	n, visible       int
	seed, embed      time.Duration
	load             time.Duration
	semantic, hybrid []time.Duration
}

// runVectors measures semantic and hybrid search in process, through
// memory.Store, at each size of cfg.vectors: the records are seeded as
// for the server benchmark, each given a random vector of cfg.dims, and
// searched with random query vectors.
func runVectors(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	var rows []vectorRow
	for _, n := range cfg.vectors {
		row, err := measureVectors(ctx, cfg, n, stderr)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	m := describeMachine()
	var b strings.Builder
	fmt.Fprintf(&b, "### Vector search, %d dimensions\n\n", cfg.dims)
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s, %s.\n\n", m.cpu, m.cpus, m.platform, m.goVersion)
	fmt.Fprintf(&b, "Each record seeded through `memory.Store.Put` and given a random unit vector through `semantic.Index.EmbedPending` (the model is left out: its speed is the endpoint's). ")
	fmt.Fprintf(&b, "Searches run in process, %d each, with a fresh random query vector: semantic is `semantic.Index.SemanticSearch` (brute force over int8 vectors of the visible partitions, then the rows read and the scope chain judged), hybrid adds the keyword search and the fusion. The first search loads the vectors into memory.\n\n", cfg.ops)
	b.WriteString("| vectors | visible | store vectors | first search (load) | semantic p50 | p95 | hybrid p50 | p95 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", thousands(r.n), thousands(r.visible), seconds(r.embed), ms(r.load),
			ms(percentile(r.semantic, 50)), ms(percentile(r.semantic, 95)), ms(percentile(r.hybrid, 50)), ms(percentile(r.hybrid, 95)))
	}
	_, err := io.WriteString(stdout, b.String())
	return err
}

func measureVectors(ctx context.Context, cfg config, n int, stderr io.Writer) (vectorRow, error) {
	row := vectorRow{n: n}
	tmp, err := os.MkdirTemp("", "memory-bench-vectors-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "workspace")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return row, err
	}
	dbPath := filepath.Join(tmp, "memory.db")
	c := newRecords(cfg.seed, min(cfg.files, n))
	fmt.Fprintf(stderr, "memory-bench: seeding %d records\n", n)
	seeded, err := seed(ctx, dbPath, root, c, n, stderr)
	if err != nil {
		return row, err
	}
	row.seed = seeded.took
	for k, v := range seeded.byKind {
		if k != "other workspace" {
			row.visible += v
		}
	}
	st, err := openStore(ctx, dbPath, nil)
	if err != nil {
		return row, err
	}
	defer st.Close()
	vx := semantic.New(st)
	model := randomModel{rand.New(rand.NewSource(cfg.seed)), cfg.dims}
	fmt.Fprintf(stderr, "memory-bench: storing %d vectors of %d dimensions\n", n, cfg.dims)
	start := time.Now()
	for {
		r, err := vx.EmbedPending(ctx, "random", model, 1000)
		if err != nil {
			return row, err
		}
		if r == (semantic.EmbedResult{}) {
			break
		}
	}
	row.embed = time.Since(start)
	p := scope.IdentityOf(root)
	search := func(hybrid bool) (time.Duration, error) {
		opts := memory.SearchOptions{Query: c.Text(4), Limit: 10}
		q := model.vector()
		start := time.Now()
		var err error
		if hybrid {
			_, err = vx.HybridSearch(ctx, p, opts, "random", q)
		} else {
			_, err = vx.SemanticSearch(ctx, p, opts, "random", q)
		}
		return time.Since(start), err
	}
	runtime.GC()
	if row.load, err = search(false); err != nil {
		return row, err
	}
	fmt.Fprintf(stderr, "memory-bench: searching %d vectors\n", n)
	for _, hybrid := range []bool{false, true} {
		var ds []time.Duration
		begin := time.Now()
		for range cfg.ops {
			d, err := search(hybrid)
			if err != nil {
				return row, err
			}
			ds = append(ds, d)
			if time.Since(begin) > cfg.budget {
				break
			}
		}
		slices.Sort(ds)
		if hybrid {
			row.hybrid = ds
		} else {
			row.semantic = ds
		}
	}
	return row, nil
}
