package eval

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/secrets"
)

// Embedder is the embeddings endpoint the hybrid evaluation embeds the
// labelled sets and their queries with (an *embed.Client).
type Embedder interface {
	Model() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// hybridSet is a labelled set, or one kind of its questions, compared by
// keyword and by hybrid search.
type hybridSet struct {
	name string
	qs   []labelled
}

// writeHybrid embeds every record of st with e and writes, for each set,
// the scores of keyword search (Store.Search) beside those of hybrid
// search (semantic.Index.HybridSearch, what memory_search answers in when
// an endpoint is configured).
func writeHybrid(ctx context.Context, stdout, stderr io.Writer, st *memory.Store, e Embedder, name string, sets []hybridSet) error {
	x := semantic.New(st)
	model := e.Model()
	if _, err := x.QueueMissing(ctx, model); err != nil {
		return fmt.Errorf("queue the labelled sets for embedding: %w", err)
	}
	embedded := 0
	for {
		r, err := x.EmbedPending(ctx, model, e, 64)
		if err != nil {
			return fmt.Errorf("embed the labelled sets with %s: %w", name, err)
		}
		embedded += r.Embedded
		if r == (semantic.EmbedResult{}) {
			break
		}
	}
	hybrid := func(ctx context.Context, q labelled, limit int) ([]memory.Hit, error) {
		opts := memory.SearchOptions{Query: q.query, Limit: limit}
		if _, found := secrets.Scan(q.query); found {
			return st.Search(ctx, q.project.ID, opts) // never sent, as the server does
		}
		vs, err := e.Embed(ctx, []string{q.query})
		if err != nil {
			return nil, fmt.Errorf("embed query %q: %w", q.query, err)
		}
		return x.HybridSearch(ctx, q.project.ID, opts, model, vs[0])
	}
	fmt.Fprintf(stdout, "\nHybrid search against keyword search on the labelled sets: %d records embedded with %s, each query embedded by it too, then fused with the keyword ranking as memory_search does with an endpoint.\n\n", embedded, name)
	fmt.Fprintln(stdout, "| set | queries | keyword R@5 | R@10 | MRR | hybrid R@5 | R@10 | MRR |")
	fmt.Fprintln(stdout, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, set := range sets {
		kw, err := scoreStore(ctx, keywordSearch(st), set.qs, stderr)
		if err != nil {
			return err
		}
		hy, err := scoreStore(ctx, hybrid, set.qs, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", set.name, len(set.qs), kw.r5, kw.r10, kw.mrr, hy.r5, hy.r10, hy.mrr)
	}
	return nil
}

// searchFunc answers one labelled query with its best limit hits.
type searchFunc func(ctx context.Context, q labelled, limit int) ([]memory.Hit, error)

func keywordSearch(st *memory.Store) searchFunc {
	return func(ctx context.Context, q labelled, limit int) ([]memory.Hit, error) {
		return st.Search(ctx, q.project.ID, memory.SearchOptions{Query: q.query, Limit: limit})
	}
}

// scoreStore runs qs through search and returns the mean scores.
func scoreStore(ctx context.Context, search searchFunc, qs []labelled, stderr io.Writer) (score, error) {
	var sc score
	for _, q := range qs {
		hits, err := search(ctx, q, 10)
		if err != nil {
			return sc, fmt.Errorf("eval query %q: %w", q.query, err)
		}
		keys := make([]string, len(hits))
		for i, h := range hits {
			keys[i] = h.Record.Key
		}
		if sc.add(keys, q.relevant) < 1 && os.Getenv("MEMORY_EVAL_VERBOSE") != "" {
			fmt.Fprintf(stderr, "miss: %q want %v got %v\n", q.query, q.relevant, keys[:min(5, len(keys))])
		}
	}
	return sc.mean(), nil
}

// kindSets are the sets of the hybrid comparison: the three labelled sets,
// then the dated sessions by kind of question.
func kindSets(facts, convs, sessions []labelled, byKind map[string][]labelled) []hybridSet {
	sets := []hybridSet{{"facts", facts}, {"conversations", convs}, {"sessions", sessions}}
	for _, k := range sessionKinds {
		sets = append(sets, hybridSet{"sessions: " + k, byKind[k]})
	}
	return slices.DeleteFunc(sets, func(s hybridSet) bool { return len(s.qs) == 0 })
}
