package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/index"
	"prom.codes/memory-mcp/scope"
)

// The evaluation measures what search finds rather than how fast: on the
// labelled sets under testdata/eval (queries and the memories that answer
// them; long conversations stored a turn per memory and questions whose
// evidence turns must come back) and on known items of the generated
// corpus at several sizes (a record searched for by a few of its words, or
// by an exact phrase of its body). It searches through memory.Store, the
// path the tools take, and compares ranking variants on the engine itself.

type factSet struct {
	Memories []struct {
		Key, Type, Description, Body string
		Tags                         []string
	}
	Queries []struct {
		Query    string
		Relevant []string
	}
}

type conversationSet struct {
	Conversations []struct {
		ID        string
		Turns     []string
		Questions []struct {
			Question string
			Evidence []int
		}
	}
}

// labelled is one query of a labelled set and the keys answering it.
type labelled struct {
	project  memory.Project
	query    string
	relevant []string
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func turnKey(i int) string { return fmt.Sprintf("turn-%03d", i) }

func runEval(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "memory-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var facts factSet
	if err := readJSON(filepath.Join(cfg.evalDir, "facts.json"), &facts); err != nil {
		return err
	}
	var convs conversationSet
	if err := readJSON(filepath.Join(cfg.evalDir, "conversations.json"), &convs); err != nil {
		return err
	}
	st, err := openStore(ctx, filepath.Join(tmp, "labelled.db"), nil)
	if err != nil {
		return err
	}
	defer st.Close()
	factsProject := memory.Project{ID: scope.IdentityOf("/eval/facts")}
	var factQs, convQs []labelled
	var docs []evalDoc
	for _, m := range facts.Memories {
		w := memory.Write{Type: memory.Type(m.Type), Key: m.Key, Description: m.Description, Body: m.Body, Tags: m.Tags}
		if _, _, err := st.Put(ctx, factsProject, w); err != nil {
			return fmt.Errorf("eval memory %s: %w", m.Key, err)
		}
		docs = append(docs, evalDoc{"facts", m.Key, [index.NumFields]string{m.Key, m.Description, m.Body, strings.Join(m.Tags, " ")}})
	}
	for _, q := range facts.Queries {
		factQs = append(factQs, labelled{factsProject, q.Query, q.Relevant})
	}
	// Each conversation is its own project, as each would be in use.
	for _, c := range convs.Conversations {
		p := memory.Project{ID: scope.IdentityOf("/eval/conversations/" + c.ID)}
		for i, turn := range c.Turns {
			w := memory.Write{Type: memory.Semantic, Key: turnKey(i), Body: turn}
			if _, _, err := st.Put(ctx, p, w); err != nil {
				return fmt.Errorf("eval conversation %s turn %d: %w", c.ID, i, err)
			}
			docs = append(docs, evalDoc{c.ID, turnKey(i), [index.NumFields]string{turnKey(i), "", turn, ""}})
		}
		for _, q := range c.Questions {
			var keys []string
			for _, e := range q.Evidence {
				keys = append(keys, turnKey(e))
			}
			convQs = append(convQs, labelled{p, q.Question, keys})
		}
	}
	fmt.Fprintf(stdout, "### Search quality\n\nLabelled sets from %s: %d memories with %d queries; %d conversations (a turn per memory) with %d questions. Recall@5 is the mean share of a query's answers in its top 5; MRR the mean of 1/rank of its first answer (0 past 10).\n\n",
		cfg.evalDir, len(facts.Memories), len(factQs), len(convs.Conversations), len(convQs))
	fmt.Fprintln(stdout, "| set | queries | recall@5 | MRR |")
	fmt.Fprintln(stdout, "|---|--:|--:|--:|")
	for _, set := range []struct {
		name string
		qs   []labelled
	}{{"facts", factQs}, {"conversations", convQs}} {
		r5, mrr, err := scoreStore(ctx, st, set.qs, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.3f | %.3f |\n", set.name, len(set.qs), r5, mrr)
	}

	fmt.Fprintf(stdout, "\nKnown items of the generated corpus: %d records per size searched for by %d of their words that together name the record, at most %d visible records holding all of them (keywords), or by %d consecutive words of their body (phrase); recall@5 is the share found in the top 5. Any %d words is the keyword query before that condition, which at 20,000 records often names hundreds of records; it is shown for comparison, not as a target.\n\n",
		knownItems, keywordLen, maxHolders, phraseLen, keywordLen)
	fmt.Fprintln(stdout, "| records | keywords recall@5 | phrase recall@5 | keywords MRR | phrase MRR | any 3 words recall@5 | keyword draws replaced |")
	fmt.Fprintln(stdout, "|--:|--:|--:|--:|--:|--:|--:|")
	for _, n := range cfg.evalSizes {
		ki, err := knownItemEval(ctx, tmp, cfg.seed, n, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %d |\n", thousands(n), ki.kinds[named].recall, ki.kinds[phrased].recall,
			ki.kinds[named].mrr, ki.kinds[phrased].mrr, ki.kinds[anyWords].recall, ki.redrawn)
	}

	fmt.Fprintln(stdout, "\nRanking variants on the engine alone (labelled sets; recall@5 / MRR):")
	fmt.Fprintln(stdout, "\n| variant | facts | conversations |")
	fmt.Fprintln(stdout, "|---|--:|--:|")
	for _, v := range variants() {
		f5, fm := scoreEngine(docs, factQs, "facts", v)
		c5, cm := scoreEngineConvs(docs, convs, v)
		fmt.Fprintf(stdout, "| %s | %.3f / %.3f | %.3f / %.3f |\n", v.name, f5, fm, c5, cm)
	}
	return nil
}

// scoreStore runs qs through Store.Search and returns mean recall@5 and MRR.
func scoreStore(ctx context.Context, st *memory.Store, qs []labelled, stderr io.Writer) (float64, float64, error) {
	var r5, mrr float64
	for _, q := range qs {
		hits, err := st.Search(ctx, q.project.ID, memory.SearchOptions{Query: q.query, Limit: 10})
		if err != nil {
			return 0, 0, fmt.Errorf("eval query %q: %w", q.query, err)
		}
		keys := make([]string, len(hits))
		for i, h := range hits {
			keys[i] = h.Record.Key
		}
		a, b := judge(keys, q.relevant)
		if a < 1 && os.Getenv("MEMORY_EVAL_VERBOSE") != "" {
			fmt.Fprintf(stderr, "miss: %q want %v got %v\n", q.query, q.relevant, keys[:min(5, len(keys))])
		}
		r5 += a
		mrr += b
	}
	return r5 / float64(len(qs)), mrr / float64(len(qs)), nil
}

// judge scores one ranked list of keys against the relevant ones.
func judge(keys, relevant []string) (recall5, rr float64) {
	found := 0
	for _, k := range keys[:min(5, len(keys))] {
		if slices.Contains(relevant, k) {
			found++
		}
	}
	for i, k := range keys[:min(10, len(keys))] {
		if slices.Contains(relevant, k) {
			rr = 1 / float64(i+1)
			break
		}
	}
	return float64(found) / float64(len(relevant)), rr
}

const (
	knownItems = 300
	keywordLen = 3
	phraseLen  = 5
	// maxHolders is the most visible records that may hold every word of
	// a keyword query: with more, the words do not name one record, and
	// even a ranking that knew how the query was drawn could not put its
	// record in the top 5.
	maxHolders = 5
	// maxRedraws bounds the draws of keywords from one record.
	maxRedraws = 20
)

type knownResult struct{ recall, mrr float64 }

// The kinds of known-item query.
const (
	named    = iota // keywords that name the record
	phrased         // consecutive words of the body
	anyWords        // keywords drawn without regard to other records
)

type knownSet struct {
	kinds   [3]knownResult
	redrawn int // keyword draws replaced because they named too many records
}

// knownItemEval seeds n generated records and searches for known ones by
// keywords, by an exact phrase, and by any keywords.
//
// Keywords are drawn at random from the record's body, as a person might
// recall them, but a person who remembers a record by three words
// remembers words that set it apart: simulated known-item queries
// (Azzopardi, de Rijke and Balog, SIGIR 2007) weigh words by how well
// they discriminate their document. Here a draw whose words are all held
// by more than maxHolders visible records is drawn again. Without that, in
// a corpus whose common words each sit in a third of the records, half of
// the draws at 20,000 records are words hundreds of records share, and no
// ranking can tell which of those records was meant.
func knownItemEval(ctx context.Context, tmp string, seed int64, n int, stderr io.Writer) (knownSet, error) {
	var out knownSet
	root := filepath.Join(tmp, fmt.Sprintf("known-%d", n))
	st, err := openStore(ctx, filepath.Join(root, "memory.db"), nil)
	if err != nil {
		return out, err
	}
	defer st.Close()
	this := memory.Project{ID: scope.IdentityOf(root)}
	other := memory.Project{ID: scope.IdentityOf(root + "-other")}
	c := newRecords(seed, 0)
	type target struct{ key, text string }
	var targets []target
	r := rand.New(rand.NewSource(seed + 11))
	start := time.Now()
	var held holders
	for i := range n {
		isOther, lvl, t, key := c.name(i)
		p := this
		if isOther {
			p = other
		}
		w := memory.Write{Scope: lvl, Type: t, Key: key, Description: c.Description(), Body: c.body(t), Tags: c.Tags()}
		if _, _, err := st.Put(ctx, p, w); err != nil {
			return out, fmt.Errorf("seed record %d: %w", i, err)
		}
		if !isOther {
			held.add(strings.ReplaceAll(key, "-", " "), w.Description, w.Body, strings.Join(w.Tags, " "))
			if r.Intn(n) < 2*knownItems {
				targets = append(targets, target{key, w.Body})
			}
		}
	}
	fmt.Fprintf(stderr, "memory-bench: seeded %d records for the known-item evaluation in %v\n", n, time.Since(start).Round(time.Millisecond))
	r.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	targets = targets[:min(knownItems, len(targets))]
	var asked [3]int
	for _, tg := range targets {
		var qs [3]string
		qs[anyWords] = keywords(r, tg.text)
		qs[named] = qs[anyWords]
		for try := 0; qs[named] != "" && held.count(qs[named]) > maxHolders; try++ {
			out.redrawn++
			if try == maxRedraws {
				qs[named] = "" // the record has no words that set it apart
				break
			}
			qs[named] = keywords(r, tg.text)
		}
		qs[phrased] = phrase(r, tg.text)
		for kind, q := range qs {
			if len(memory.Terms(q)) == 0 {
				continue // nothing to search for, as in "of the and"
			}
			asked[kind]++
			hits, err := st.Search(ctx, this.ID, memory.SearchOptions{Query: q, Limit: 10})
			if err != nil {
				return out, fmt.Errorf("known-item query %q: %w", q, err)
			}
			keys := make([]string, len(hits))
			for i, h := range hits {
				keys[i] = h.Record.Key
			}
			a, b := judge(keys, []string{tg.key})
			if a < 1 && os.Getenv("MEMORY_EVAL_VERBOSE") != "" {
				fmt.Fprintf(stderr, "miss (kind %d): %q want %s got %v\n", kind, q, tg.key, keys[:min(5, len(keys))])
			}
			out.kinds[kind].recall += a
			out.kinds[kind].mrr += b
		}
	}
	for k := range out.kinds {
		out.kinds[k].recall /= float64(max(asked[k], 1))
		out.kinds[k].mrr /= float64(max(asked[k], 1))
	}
	return out, nil
}

// holders counts the records holding every word of a query, by the
// lower-cased words of their fields as keywords draws them.
type holders struct {
	recs map[string][]int32 // by word, in record order
	n    int32
}

func (h *holders) add(fields ...string) {
	if h.recs == nil {
		h.recs = map[string][]int32{}
	}
	for _, f := range fields {
		for _, w := range words(f) {
			w = strings.ToLower(w)
			if l := h.recs[w]; len(l) == 0 || l[len(l)-1] != h.n {
				h.recs[w] = append(l, h.n)
			}
		}
	}
	h.n++
}

func (h *holders) count(q string) int {
	ws := strings.Fields(q)
	if len(ws) == 0 {
		return 0
	}
	in := map[int32]int{}
	n := 0
	for _, w := range ws {
		for _, rec := range h.recs[w] {
			if in[rec]++; in[rec] == len(ws) {
				n++
			}
		}
	}
	return n
}

// words are text's words without punctuation.
func words(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == '\n' || r == '.' })
}

// keywords picks keywordLen distinct searchable words of text at random.
func keywords(r *rand.Rand, text string) string {
	var cands []string
	for _, w := range words(text) {
		w = strings.ToLower(w)
		if len(memory.Terms(w)) > 0 && !slices.Contains(cands, w) && !isNumber(w) {
			cands = append(cands, w)
		}
	}
	if len(cands) < keywordLen {
		return ""
	}
	r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	return strings.Join(cands[:keywordLen], " ")
}

// phrase picks phraseLen consecutive words of one sentence of text, as a
// person quoting it would.
func phrase(r *rand.Rand, text string) string {
	var runs [][]string
	for _, s := range strings.FieldsFunc(text, func(r rune) bool { return r == '.' || r == '\n' }) {
		ws := strings.Fields(s)
		if len(ws) > 0 && isNumber(ws[0]) {
			ws = ws[1:] // a step's number
		}
		if len(ws) >= phraseLen {
			runs = append(runs, ws)
		}
	}
	if len(runs) == 0 {
		return ""
	}
	ws := runs[r.Intn(len(runs))]
	i := r.Intn(len(ws) - phraseLen + 1)
	return strings.Join(ws[i:i+phraseLen], " ")
}

func isNumber(s string) bool { return strings.Trim(s, "0123456789") == "" }

// evalDoc is a labelled memory as the engine sees it.
type evalDoc struct {
	part, key string
	fields    [index.NumFields]string
}

type variant struct {
	name string
	prm  index.Params
}

func variants() []variant {
	d := index.DefaultParams
	flat := d
	flat.Weights = [index.NumFields]float64{1, 1, 1, 1}
	noPhrase := d
	noPhrase.Phrase = 0
	noNorm := d
	noNorm.B = [index.NumFields]float64{}
	fullNorm := d
	fullNorm.B = [index.NumFields]float64{1, 1, 1, 1}
	heavyKey := d
	heavyKey.Weights = [index.NumFields]float64{5, 3, 1, 2}
	noCoord := d
	noCoord.Coord = 0
	return []variant{
		{"default", d},
		{"equal field weights", flat},
		{"heavier key and description", heavyKey},
		{"no phrase bonus", noPhrase},
		{"no coordination of query words", noCoord},
		{"no length normalisation (b=0)", noNorm},
		{"full length normalisation (b=1)", fullNorm},
	}
}

func partitionOf(docs []evalDoc, part string) (*index.Partition, map[int64]string) {
	p := index.NewPartition()
	keys := map[int64]string{}
	for i, d := range docs {
		if d.part == part {
			p.Put(index.Doc{ID: int64(i), Fields: d.fields})
			keys[int64(i)] = d.key
		}
	}
	return p, keys
}

func scoreEngine(docs []evalDoc, qs []labelled, part string, v variant) (float64, float64) {
	p, keys := partitionOf(docs, part)
	var r5, mrr float64
	for _, q := range qs {
		a, b := judge(engineKeys(p, keys, q.query, v), q.relevant)
		r5 += a
		mrr += b
	}
	return r5 / float64(len(qs)), mrr / float64(len(qs))
}

func scoreEngineConvs(docs []evalDoc, convs conversationSet, v variant) (float64, float64) {
	var r5, mrr float64
	n := 0
	for _, c := range convs.Conversations {
		p, keys := partitionOf(docs, c.ID)
		for _, q := range c.Questions {
			var rel []string
			for _, e := range q.Evidence {
				rel = append(rel, turnKey(e))
			}
			a, b := judge(engineKeys(p, keys, q.Question, v), rel)
			r5 += a
			mrr += b
			n++
		}
	}
	return r5 / float64(n), mrr / float64(n)
}

func engineKeys(p *index.Partition, keys map[int64]string, q string, v variant) []string {
	var terms []string
	for _, w := range strings.Fields(q) {
		terms = append(terms, index.Analyze(w)...)
	}
	var out []string
	for _, r := range index.Search([]*index.Partition{p}, index.Query{Terms: terms, Phrase: index.Sequence(q), K: 10}, v.prm) {
		out = append(out, keys[r.ID])
	}
	return out
}
