package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

// records makes the benchmark's records. Record i's name (where it lives,
// its type and key) depends on i alone, so the benchmark can address any
// seeded record without asking the server; its text comes from the
// embedded corpus's random stream. The server's Go benchmarks in
// cmd/memory-mcp seed the same records.
type records struct {
	*corpus.Corpus
	seed  int64
	files int // records 0..files-1 are the project's mirrored facts
}

func newRecords(seed int64, files int) *records {
	return &records{Corpus: corpus.New(seed), seed: seed, files: files}
}

// name says where record i lives and what it is. Records below c.files are
// the benchmarked project's facts, mirrored to markdown. Of the rest, 30%
// are its episodes and 25% its scratch notes (neither has a file), 15%
// machine-wide facts and procedures (system and workspace scope), and 30%
// belong to another workspace sharing the database.
func (c *records) name(i int) (other bool, lvl scope.Level, t memory.Type, key string) {
	h := corpus.Mix(c.seed, i)
	key = corpus.TermAt((h>>16)%1000) + "-" + corpus.TermAt(h>>32) + "-" + strconv.Itoa(i)
	if i < c.files {
		return false, scope.Project, memory.Semantic, key
	}
	switch u := h % 100; {
	case u < 30:
		return false, scope.Project, memory.Episodic, key
	case u < 55:
		return false, scope.Project, memory.Working, key
	case u < 65:
		return false, scope.System, memory.Semantic, key
	case u < 70:
		return false, scope.System, memory.Procedural, key
	case u < 75:
		return false, scope.Workspace, memory.Semantic, key
	default:
		return true, scope.Project, []memory.Type{memory.Semantic, memory.Procedural, memory.Episodic, memory.Working}[(h>>8)%4], key
	}
}

// body is fresh text of the length typical for type t.
func (c *records) body(t memory.Type) string {
	switch t {
	case memory.Semantic:
		return c.Text(15 + c.Intn(45))
	case memory.Procedural:
		return c.Steps(30 + c.Intn(90))
	case memory.Episodic:
		return c.Text(60 + c.Intn(190))
	}
	return c.Text(10 + c.Intn(70))
}

// seedResult says what seeding wrote.
type seedResult struct {
	took   time.Duration
	byKind map[string]int // "project semantic", "other project", ...
}

// seed writes records 0..n-1 of c into the database at dbPath for the
// workspace at root, straight through memory.Store.Put, the write path the
// server's tools use (validation and secret scan included), with the
// project's facts written through the markdown mirror as the server would.
// It is much quicker than n tool calls and leaves the same database and
// files behind.
func seed(ctx context.Context, dbPath, root string, c *records, n int, progress io.Writer) (seedResult, error) {
	res := seedResult{byKind: map[string]int{}}
	start := time.Now()
	st, err := openStore(ctx, dbPath, nil)
	if err != nil {
		return res, err
	}
	defer st.Close()
	dir, err := mirror.Open(root)
	if err != nil {
		return res, err
	}
	defer dir.Close()
	this := memory.Project{ID: scope.IdentityOf(root), Mirror: dir}
	other := memory.Project{ID: scope.IdentityOf(filepath.Join(filepath.Dir(root), "other-workspace"))}
	step := max(n/10, 1)
	for i := range n {
		isOther, lvl, t, key := c.name(i)
		p := this
		if isOther {
			p = other
		}
		w := memory.Write{
			Scope: lvl, Type: t, Key: key, Description: c.Description(), Body: c.body(t),
			Tags: c.Tags(), Source: memory.FromTool,
		}
		if t == memory.Semantic {
			conf := 0.3 + float64(c.Intn(66))/100
			w.Confidence = &conf
		}
		if t == memory.Episodic {
			w.SessionID = fmt.Sprintf("session-%d", i/8)
		}
		if _, _, err := st.Put(ctx, p, w); err != nil {
			return res, fmt.Errorf("seed record %d (%s): %w", i, key, err)
		}
		kind := lvl.String() + " " + string(t)
		if isOther {
			kind = "other workspace"
		}
		res.byKind[kind]++
		if (i+1)%step == 0 && progress != nil {
			fmt.Fprintf(progress, "memory-bench: seeded %d of %d records (%v)\n", i+1, n, time.Since(start).Round(time.Millisecond))
		}
	}
	res.took = time.Since(start)
	return res, nil
}
