package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/weave"
)

// app is the server's core, shared by the MCP tools and the command line:
// the store, this workspace's project and mirror, and the weaver.
type app struct {
	cfg    Config
	log    *slog.Logger
	store  *memory.Store
	dir    *mirror.Dir
	proj   memory.Project
	weaver *weave.Weaver
	sem    *semantic // nil without an embeddings endpoint
}

func openApp(ctx context.Context, cfg Config, log *slog.Logger) (*app, error) {
	return openAppWith(ctx, cfg, log, nil)
}

// openAppWith is openApp with the store opened with opts.
func openAppWith(ctx context.Context, cfg Config, log *slog.Logger, opts *memory.Options) (*app, error) {
	dir, err := mirror.Open(cfg.Root)
	if err != nil {
		return nil, err
	}
	dir.SetLogger(log)
	st, err := openStore(ctx, cfg.DB(), opts)
	if err != nil {
		return nil, cfg.dbError(err)
	}
	a := &app{
		cfg: cfg, log: log, store: st, dir: dir, weaver: weave.New(),
		proj: memory.Project{ID: cfg.Project, Mirror: dir},
	}
	// Open purged the rest already.
	if _, err := st.PurgeMirrored(ctx, a.proj); err != nil {
		st.Close()
		return nil, err
	}
	if a.sem, err = newSemantic(cfg, st, log); err != nil {
		st.Close()
		return nil, err
	}
	return a, nil
}

// purge deletes expired records; this project's expired facts and
// procedures take their markdown files with them.
func (a *app) purge(ctx context.Context) (int64, error) {
	n, err := a.store.Purge(ctx)
	if err != nil {
		return n, err
	}
	m, err := a.store.PurgeMirrored(ctx, a.proj)
	return n + int64(m), err
}

func (a *app) Close() error {
	if a.dir != nil {
		a.dir.Close()
	}
	return a.store.Close()
}

// sync brings the markdown files into the database. A file it cannot accept
// is reported, not fatal; an unusable directory is. Without a mirror (a
// team server's callers) there is nothing to bring in.
func (a *app) sync(ctx context.Context) (mirror.Report, error) {
	if a.dir == nil {
		return mirror.Report{}, nil
	}
	rep, err := mirror.Sync(ctx, a.store, a.cfg.Project, a.dir)
	if err != nil {
		return rep, fmt.Errorf("sync %s: %w", a.dir.Path(), err)
	}
	return rep, nil
}

// recallTypes are what a recall block weaves.
var recallTypes = []memory.Type{memory.Semantic, memory.Procedural}

// recall weaves the effective facts and procedures into one block of at
// most maxTokens (the configured budget when <= 0), the records relevant to
// query first, and counts a use of each record woven in.
func (a *app) recall(ctx context.Context, query string, types []memory.Type, maxTokens int) (weave.Block, error) {
	if maxTokens <= 0 {
		maxTokens = a.cfg.TokenBudget
	}
	if len(types) == 0 {
		types = recallTypes
	}
	types = slices.DeleteFunc(slices.Clone(types), func(t memory.Type) bool { return t != memory.Semantic && t != memory.Procedural })
	if !a.weaver.Ready() {
		defer a.noteTokenizer("recall")
	}
	var relevant []memory.Record
	if query != "" && len(memory.Terms(query)) > 0 {
		// One search over the woven types, not one per type: the full-text
		// match is the cost.
		hits, _, _, err := a.search(ctx, a.cfg.Project, "", memory.SearchOptions{Query: query, Types: types, Limit: 40, Bodies: true, NoPreview: true})
		if err != nil {
			return weave.Block{}, err
		}
		for _, h := range hits {
			relevant = append(relevant, h.Record)
		}
	}
	total := 0
	for _, t := range types {
		n, err := a.store.Count(ctx, a.cfg.Project, t)
		if err != nil {
			return weave.Block{}, err
		}
		total += n
	}
	// Read the head of each type's order, and more only when the block
	// took all of a type that had more: reading bodies costs more than
	// weaving them, and a block fills up on about one record per hundred
	// tokens of its budget.
	var b weave.Block
	for limit := max(8, maxTokens/96); ; limit *= 4 {
		recs, err := a.store.Effective(ctx, a.cfg.Project, types, limit)
		if err != nil {
			return weave.Block{}, err
		}
		read := make(map[string]bool, len(recs))
		for _, r := range recs {
			read[r.ID] = true
		}
		ids := make([]string, len(relevant))
		for i, r := range relevant {
			ids[i] = r.ID
			if !read[r.ID] {
				recs = append(recs, r)
				read[r.ID] = true
			}
		}
		b = a.weaver.Weave(recs, weave.Options{MaxTokens: maxTokens, Relevant: ids, Unlisted: max(0, total-len(recs))})
		if !needMore(recs, b.Included, types, limit) {
			break
		}
	}
	if err := a.store.Touch(ctx, b.Included); err != nil {
		return b, err
	}
	return b, nil
}

// noteTokenizer logs that the tokenizer has been loaded, and for what: its
// table is read in place from the binary, and the pages counting touches
// (about 2 MB) become resident only once something is counted.
func (a *app) noteTokenizer(what string) {
	if a.weaver.Ready() {
		a.log.Debug("loaded the tokenizer", "for", what)
	}
}

// needMore reports whether a type was read only in part (limit rows) yet
// every record read of it was woven in: the records not read might fit.
func needMore(recs []memory.Record, included []string, types []memory.Type, limit int) bool {
	in := make(map[string]bool, len(included))
	for _, id := range included {
		in[id] = true
	}
	for _, t := range types {
		n, all := 0, true
		for _, r := range recs {
			if r.Type == t {
				n++
				all = all && in[r.ID]
			}
		}
		if n >= limit && all {
			return true
		}
	}
	return false
}
