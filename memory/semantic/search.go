package semantic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"prom.codes/memory-mcp/memory"

	"prom.codes/memory-mcp/memory/excerpt"
	"prom.codes/memory-mcp/memory/index"
	"prom.codes/memory-mcp/memory/vector"
	"prom.codes/memory-mcp/scope"
)

// Mode is how a search finds records: by their words, by their meaning
// (the vectors of an embeddings model), or both fused.
type Mode string

// The modes.
const (
	ModeKeyword  Mode = "keyword"
	ModeSemantic Mode = "semantic"
	ModeHybrid   Mode = "hybrid"
)

// ParseMode validates a mode name; "" is "". Errors: CodeInvalidArgument
// naming field.
func ParseMode(field, s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "", ModeKeyword, ModeSemantic, ModeHybrid:
		return m, nil
	}
	return "", memory.Errorf(memory.CodeInvalidArgument, field, "unknown mode (want keyword, semantic or hybrid)")
}

func searchLimit(n int) int {
	if n <= 0 {
		return 10
	}
	return min(n, 100)
}

// SemanticSearch ranks the effective records passing opts's filters by the
// cosine similarity of their vectors of model with query, the vector the
// same model gave for the query's text; the score is that similarity, at
// least 0. Records the model has not embedded yet are not found, nor are
// those not similar at all. opts.Query only shapes the previews. Only
// this project's records and the shared scopes' are read.
// Errors: CodeInvalidArgument for an empty or zero query vector.
func (s *Index) SemanticSearch(ctx context.Context, p scope.Identity, opts memory.SearchOptions, model string, query []float32) ([]memory.Hit, error) {
	return memory.Retry(ctx, s.st, func() ([]memory.Hit, error) { return s.semanticSearch1(ctx, p, opts, model, query) })
}

func (s *Index) semanticSearch1(ctx context.Context, p scope.Identity, opts memory.SearchOptions, model string, query []float32) ([]memory.Hit, error) {
	q := vector.Unit(query)
	if q == nil {
		return nil, memory.Errorf(memory.CodeInvalidArgument, "query", "has no vector")
	}
	limit := searchLimit(opts.Limit)
	if err := s.vectors.catchUp(ctx, s.st.DB(), model, len(q)); err != nil {
		return nil, fmt.Errorf("semantic search: %w", err)
	}
	keys, global := memory.VisibleBuckets(p)
	hits := []memory.Hit{}
	seen := map[int64]bool{}
	// Filters and the scope chain are judged on the rows, so read more
	// neighbours than wanted, and more again when too many fall out.
	for k := limit*4 + 20; ; k *= 4 {
		near := s.vectors.nearest(q, keys, global, k)
		var fresh []vector.Match
		for _, n := range near {
			if !seen[n.ID] {
				seen[n.ID] = true
				fresh = append(fresh, n)
			}
		}
		ids := make([]int64, len(fresh))
		for i, n := range fresh {
			ids[i] = n.ID
		}
		found, err := s.st.Found(ctx, p, opts, ids)
		if err != nil {
			return nil, fmt.Errorf("semantic search: %w", err)
		}
		for _, n := range fresh {
			h, ok := found[n.ID]
			if !ok || !passes(h.Record, opts) {
				continue
			}
			h.Score = min(1, max(0, float64(n.Sim)))
			if h.Score < opts.MinScore {
				continue
			}
			hits = append(hits, h)
		}
		// Neighbours come nearest first: past one below min_score, no
		// further one can pass.
		if len(hits) >= limit || len(near) < k || len(near) > 0 && float64(near[len(near)-1].Sim) < opts.MinScore {
			break
		}
	}
	return hits[:min(limit, len(hits))], nil
}

// passes reports whether r passes opts's filters.
func passes(r memory.Record, opts memory.SearchOptions) bool {
	if opts.Type != "" && r.Type != opts.Type || len(opts.Types) > 0 && !slices.Contains(opts.Types, r.Type) {
		return false
	}
	if opts.Scope != nil && r.Scope != *opts.Scope {
		return false
	}
	if !opts.Since.IsZero() && r.UpdatedAt.Before(opts.Since) {
		return false
	}
	for _, t := range opts.Tags {
		if !slices.Contains(r.Tags, t) {
			return false
		}
	}
	return true
}

// HybridSearch fuses the keyword ranking of Search with the similarity
// ranking of SemanticSearch: a record scores the mean of its keyword score
// relative to the best keyword hit's and its similarity to the query (a
// keyword hit past the neighbours read counts the last neighbour's). A
// model that finds every record about as similar adds about the same to
// each and leaves the keyword order; one that tells records apart moves
// them, and a record found by meaning alone scores half its similarity
// beside keyword hits, so that the nearest of unrelated records scores
// low. An exact keyword hit, a record
// holding every searchable word of the query, ranks above every record
// that is not one, and scores at least as high; exact hits are looked for
// among the best 100 keyword matches. opts.MinScore applies to
// the fused score. Errors: those of Search, but a query with no
// searchable word is searched by meaning alone.
func (s *Index) HybridSearch(ctx context.Context, p scope.Identity, opts memory.SearchOptions, model string, query []float32) ([]memory.Hit, error) {
	return memory.Retry(ctx, s.st, func() ([]memory.Hit, error) { return s.hybridSearch1(ctx, p, opts, model, query) })
}

func (s *Index) hybridSearch1(ctx context.Context, p scope.Identity, opts memory.SearchOptions, model string, query []float32) ([]memory.Hit, error) {
	limit := searchLimit(opts.Limit)
	deep := opts
	// The keyword ranking is read as deep as it goes: BM25 can put a long
	// record holding every word below dozens of short ones repeating one
	// of them, and an exact hit it leaves out cannot be put first.
	deep.Limit, deep.MinScore, deep.Bodies = 100, 0, true
	kw, err := s.st.Search(ctx, p, deep)
	if err != nil && !errors.Is(err, memory.ErrInvalidArgument) {
		return nil, err
	}
	near := deep
	near.Limit = min(100, max(3*limit, 30))
	sem, err := s.SemanticSearch(ctx, p, near, model, query)
	if err != nil {
		return nil, err
	}
	terms, words := excerpt.Analyze(opts.Query)
	var want []string // the query words a keyword hit's Why must hold to be exact
	for _, t := range terms {
		if !slices.Contains(want, words[t]) {
			want = append(want, words[t])
		}
	}
	return fuse(kw, sem, memory.Terms(opts.Query), want, limit, opts.MinScore, opts.Bodies), nil
}

// fused is one record in a fusion.
type fused struct {
	hit    memory.Hit
	score  float64
	exact  bool
	kwRank int     // 1-based; 0 when the keyword ranking does not hold it
	sim    float64 // its similarity, when the similarity ranking holds it
}

// fuse merges a keyword ranking and a similarity ranking (each best
// first, with bodies) as HybridSearch describes. A keyword hit whose Why
// lacks one of want (query words) holds some words only, and its text is
// not analysed again; nil want reads every text.
func fuse(kw, sem []memory.Hit, terms, want []string, limit int, minScore float64, bodies bool) []memory.Hit {
	byID := map[string]*fused{}
	var all []*fused
	get := func(h memory.Hit) *fused {
		f, ok := byID[h.Record.ID]
		if !ok {
			f = &fused{hit: h}
			byID[h.Record.ID] = f
			all = append(all, f)
		}
		return f
	}
	lists := 0
	for _, l := range [][]memory.Hit{kw, sem} {
		if len(l) > 0 {
			lists++
		}
	}
	if lists == 0 {
		return []memory.Hit{}
	}
	// A convex combination of the two scores: the keyword score relative
	// to the best keyword hit, and the similarity itself. A model that
	// tells records apart moves them; one that finds everything about as
	// similar adds about the same to each and leaves the keyword order.
	// A keyword hit the similarity ranking did not reach is no more
	// similar than the last neighbour it holds.
	kwTop, floor := 0.0, 0.0
	if len(kw) > 0 {
		kwTop = kw[0].Score
	}
	if len(sem) > 0 {
		floor = min(1, max(0, sem[len(sem)-1].Score))
	}
	for i, h := range kw {
		f := get(h)
		if kwTop > 0 {
			f.score = h.Score / kwTop
		}
		f.kwRank = i + 1
		f.sim = floor
		f.exact = (want == nil || containsAll(h.Why.Terms, want)) && holdsAll(h.Record, terms)
	}
	for _, h := range sem {
		f := get(h)
		f.sim = min(1, max(0, h.Score))
		if f.kwRank == 0 {
			// Past the depth of the keyword ranking, an exact hit is still one.
			f.exact = holdsAll(h.Record, terms)
		}
	}
	var fuzzy float64 // the best score of a record that is not an exact hit
	for _, f := range all {
		f.score = min(1, (f.score+f.sim)/float64(lists))
		if !f.exact {
			fuzzy = max(fuzzy, f.score)
		}
	}
	for _, f := range all {
		if f.exact {
			f.score = max(f.score, fuzzy)
		}
	}
	slices.SortStableFunc(all, func(a, b *fused) int {
		switch {
		case a.exact != b.exact:
			if a.exact {
				return -1
			}
			return 1
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case a.kwRank != b.kwRank:
			if b.kwRank == 0 || a.kwRank != 0 && a.kwRank < b.kwRank {
				return -1
			}
			return 1
		}
		return 0
	})
	out := make([]memory.Hit, 0, min(limit, len(all)))
	for _, f := range all {
		if len(out) == limit || f.score < minScore {
			break
		}
		h := f.hit
		h.Score = f.score
		if !bodies {
			h.Record.Body = ""
		}
		out = append(out, h)
	}
	return out
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// holdsAll reports whether r holds every one of terms (analyzed query
// terms) in its key, description, body or tags.
func holdsAll(r memory.Record, terms []string) bool {
	if len(terms) == 0 {
		return false
	}
	text := strings.NewReplacer("-", " ", "_", " ").Replace(r.Key) + "\n" + r.Description + "\n" + r.Body + "\n" + strings.Join(r.Tags, " ")
	have := map[string]bool{}
	for _, t := range index.Analyze(text) {
		have[t] = true
	}
	for _, t := range terms {
		if !have[t] {
			return false
		}
	}
	return true
}
