package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

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
func seed(ctx context.Context, dbPath, root string, c *corpus, n int, progress io.Writer) (seedResult, error) {
	res := seedResult{byKind: map[string]int{}}
	start := time.Now()
	st, err := memory.Open(ctx, dbPath, nil)
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
			Scope: lvl, Type: t, Key: key, Description: c.description(), Body: c.body(t),
			Tags: c.tags(), Source: memory.FromTool,
		}
		if t == memory.Semantic {
			conf := 0.3 + float64(c.r.Intn(66))/100
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
