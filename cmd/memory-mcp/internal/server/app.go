package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/embed"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/secrets"
	"prom.codes/memory-mcp/weave"
)

// App is the server's core, shared by the MCP tools and the command line:
// the store, this workspace's project and mirror, and the weaver.
type App struct {
	Store   *memory.Store
	Vectors *semantic.Index // Store's embedding queue and vectors
	Dir     *mirror.Dir     // this workspace's mirror; nil without one (a team's callers)
	Proj    memory.Project  // the project written to, with its mirror
	Weaver  *weave.Weaver
	Embed   *embed.Worker // nil without an embeddings endpoint
	Log     *slog.Logger

	Project       scope.Identity // whose memory is read
	Root          string         // the workspace root
	TokenBudget   int            // the recall block's default budget
	Confirmations int            // sessions confirming a statement before it becomes a fact
	Version       string         // reported to clients

	// DBName is the database as logs show it; Redact takes its password
	// out of an error's text (nil: nothing to take out).
	DBName string
	Redact func(error) error
}

// redact is a.Redact, or err unchanged without one.
func (a *App) redact(err error) error {
	if a.Redact == nil {
		return err
	}
	return a.Redact(err)
}

// Purge deletes expired records; this project's expired facts and
// procedures take their markdown files with them.
func (a *App) Purge(ctx context.Context) (int64, error) {
	n, err := a.Store.Purge(ctx)
	if err != nil {
		return n, err
	}
	m, err := a.Store.PurgeMirrored(ctx, a.Proj)
	return n + int64(m), err
}

// Close closes the mirror and the store.
func (a *App) Close() error {
	if a.Dir != nil {
		a.Dir.Close()
	}
	return a.Store.Close()
}

// Sync brings the markdown files into the database. A file it cannot accept
// is reported, not fatal; an unusable directory is. Without a mirror (a
// team server's callers) there is nothing to bring in.
func (a *App) Sync(ctx context.Context) (mirror.Report, error) {
	if a.Dir == nil {
		return mirror.Report{}, nil
	}
	rep, err := mirror.Sync(ctx, a.Store, a.Project, a.Dir)
	if err != nil {
		return rep, fmt.Errorf("sync %s: %w", a.Dir.Path(), err)
	}
	return rep, nil
}

// Capture records a finished session in this project.
func (a *App) Capture(ctx context.Context, c memory.Capture) (memory.CaptureResult, error) {
	return a.Store.Capture(ctx, a.Proj, c, a.Confirmations)
}

// recallTypes are what a recall block weaves.
var recallTypes = []memory.Type{memory.Semantic, memory.Procedural}

// Recall weaves the effective facts and procedures into one block of at
// most maxTokens (the configured budget when <= 0), the records relevant to
// query first, and counts a use of each record woven in.
func (a *App) Recall(ctx context.Context, query string, types []memory.Type, maxTokens int) (weave.Block, error) {
	if maxTokens <= 0 {
		maxTokens = a.TokenBudget
	}
	if len(types) == 0 {
		types = recallTypes
	}
	types = slices.DeleteFunc(slices.Clone(types), func(t memory.Type) bool { return t != memory.Semantic && t != memory.Procedural })
	if !a.Weaver.Ready() {
		defer a.noteTokenizer("recall")
	}
	var relevant []memory.Record
	if query != "" && len(memory.Terms(query)) > 0 {
		// One search over the woven types, not one per type: the full-text
		// match is the cost.
		hits, _, _, err := a.Search(ctx, a.Project, "", memory.SearchOptions{Query: query, Types: types, Limit: 40, Bodies: true, NoPreview: true})
		if err != nil {
			return weave.Block{}, err
		}
		for _, h := range hits {
			relevant = append(relevant, h.Record)
		}
	}
	total := 0
	for _, t := range types {
		n, err := a.Store.Count(ctx, a.Project, t)
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
		recs, err := a.Store.Effective(ctx, a.Project, types, limit)
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
		b = a.Weaver.Weave(recs, weave.Options{MaxTokens: maxTokens, Relevant: ids, Unlisted: max(0, total-len(recs))})
		if !needMore(recs, b.Included, types, limit) {
			break
		}
	}
	if err := a.Store.Touch(ctx, b.Included); err != nil {
		return b, err
	}
	return b, nil
}

// noteTokenizer logs that the tokenizer has been loaded, and for what: its
// table is read in place from the binary, and the pages counting touches
// (about 2 MB) become resident only once something is counted.
func (a *App) noteTokenizer(what string) {
	if a.Weaver.Ready() {
		a.Log.Debug("loaded the tokenizer", "for", what)
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

// Search answers a search in mode (the default: hybrid with an endpoint,
// keyword without). It returns the mode it answered in and a note for the
// reader when that is not what was asked, or when records still wait to
// be embedded. Only a query that passes the secret scan is sent.
func (a *App) Search(ctx context.Context, p scope.Identity, mode semantic.Mode, opts memory.SearchOptions) ([]memory.Hit, semantic.Mode, string, error) {
	w := a.Embed
	if mode == "" {
		mode = semantic.ModeKeyword
		if w != nil {
			mode = semantic.ModeHybrid
		}
	}
	keyword := func(note string) ([]memory.Hit, semantic.Mode, string, error) {
		hits, err := a.Store.Search(ctx, p, opts)
		return hits, semantic.ModeKeyword, note, err
	}
	if mode == semantic.ModeKeyword {
		return keyword("")
	}
	if w == nil {
		return keyword(fmt.Sprintf("%s search needs an embeddings endpoint (set PROMETHEUS_MEMORY_EMBEDDINGS_URL and _MODEL); answered by keyword", mode))
	}
	if f, found := secrets.Scan(opts.Query); found {
		return keyword(fmt.Sprintf("the query looks like it holds a secret (rule %s), so it was not sent to the embeddings endpoint; answered by keyword", f.Rule))
	}
	if w.Quiet() {
		return keyword("the embeddings endpoint did not answer in time lately; answered by keyword")
	}
	vec, err := w.Query(ctx, opts.Query)
	if err != nil {
		if ctx.Err() != nil {
			return nil, mode, "", ctx.Err()
		}
		// The details go to the server's log only: on a team server the
		// caller is not the one who configured the endpoint.
		a.Log.Warn("embed query; answered by keyword", "err", err)
		if e := (*embed.Error)(nil); errors.As(err, &e) && e.Timeout {
			return keyword("the embeddings endpoint gave no answer in time; answered by keyword")
		}
		return keyword("the embeddings endpoint could not be used; answered by keyword (the server's log says why)")
	}
	model := w.Client().Model()
	if changed, err := a.Vectors.NoteDims(ctx, model, len(vec)); err != nil {
		return nil, mode, "", err
	} else if changed {
		a.Log.Info("the embeddings model gives vectors of a new length: re-embedding every record", "model", model, "dims", len(vec))
	}
	w.Kick()
	var hits []memory.Hit
	if mode == semantic.ModeSemantic {
		hits, err = a.Vectors.SemanticSearch(ctx, p, opts, model, vec)
	} else {
		hits, err = a.Vectors.HybridSearch(ctx, p, opts, model, vec)
	}
	if err != nil {
		return nil, mode, "", err
	}
	note := ""
	if n, err := a.Vectors.EmbedWaiting(ctx, p, model); err == nil && n > 0 {
		note = fmt.Sprintf("%d records are still waiting to be embedded; until then only their words can find them", n)
		if mode == semantic.ModeSemantic {
			note = fmt.Sprintf("%d records are still waiting to be embedded; semantic search cannot find them yet", n)
		}
	}
	return hits, mode, note, nil
}
