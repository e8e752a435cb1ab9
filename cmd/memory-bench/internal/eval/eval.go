// Package eval measures what search finds rather than how fast: on the
// labelled sets under testdata/eval (queries and the memories that answer
// them; long conversations stored a turn per memory and questions whose
// evidence turns must come back) and on known items of a generated corpus
// at several sizes (a record searched for by a few of its words, or by an
// exact phrase of its body). It searches through memory.Store on SQLite,
// the path the tools take, the known items also through a Searcher the
// caller starts on the same database (the real server over stdio), and
// compares ranking variants on the engine itself, and with an embeddings
// endpoint compares hybrid search with keyword search. It imports memory,
// memory/index, memory/semantic, memory/sqlite, scope and secrets.
package eval

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
	"prom.codes/memory-mcp/memory/sqlite"
	"prom.codes/memory-mcp/scope"
)

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

// sessionSet is the harder conversational set: two speakers over dated
// sessions, and questions by kind whose words mostly differ from those of
// their evidence turns.
type sessionSet struct {
	Conversations []struct {
		ID       string
		Speakers []string
		Sessions []struct {
			Date  time.Time
			Turns []string
		}
		Questions []struct {
			Kind, Question string
			Evidence       [][2]int // session, turn
		}
	}
}

// sessionKey names turn t of session s.
func sessionKey(s, t int) string { return fmt.Sprintf("s%d-t%02d", s, t) }

// sessionTurn is one turn of a sessionSet as a record.
type sessionTurn struct {
	conv, key, text string
	created         time.Time
}

// sessionQuery is one question of a sessionSet.
type sessionQuery struct {
	conv, kind, question string
	evidence             []string // keys
}

// loadSessions reads a sessionSet and flattens it into turns, each
// created a minute after the one before within its session, and
// questions.
func loadSessions(path string) ([]sessionTurn, []sessionQuery, error) {
	var set sessionSet
	if err := readJSON(path, &set); err != nil {
		return nil, nil, err
	}
	var turns []sessionTurn
	var qs []sessionQuery
	for _, c := range set.Conversations {
		for si, s := range c.Sessions {
			for ti, t := range s.Turns {
				turns = append(turns, sessionTurn{c.ID, sessionKey(si, ti), t, s.Date.Add(time.Duration(ti) * time.Minute)})
			}
		}
		for _, q := range c.Questions {
			sq := sessionQuery{conv: c.ID, kind: q.Kind, question: q.Question}
			for _, e := range q.Evidence {
				if e[0] >= len(c.Sessions) || e[1] >= len(c.Sessions[e[0]].Turns) {
					return nil, nil, fmt.Errorf("%s: %s: question %q: no turn %v", path, c.ID, q.Question, e)
				}
				sq.evidence = append(sq.evidence, sessionKey(e[0], e[1]))
			}
			qs = append(qs, sq)
		}
	}
	return turns, qs, nil
}

// reachable is the share of a question's evidence turns holding any of
// its searchable words: the most any ranking by the words alone could
// find, however deep it looked. The question-difficulty ceiling of the
// set, as maxHolders is of the known items.
func reachable(turns []sessionTurn, q sessionQuery) float64 {
	qt := memory.Terms(q.question)
	n := 0
	for _, t := range turns {
		if t.conv != q.conv || !slices.Contains(q.evidence, t.key) {
			continue
		}
		for _, w := range memory.Terms(t.text) {
			if slices.Contains(qt, w) {
				n++
				break
			}
		}
	}
	return float64(n) / float64(len(q.evidence))
}

// sessionKinds are the kinds of question in the order they are reported.
var sessionKinds = []string{"paraphrase", "two-turn", "when", "person"}

// Config says what an evaluation runs on.
type Config struct {
	Dir   string // the labelled sets
	Sizes []int  // corpus sizes of the known-item evaluation
	Seed  int64  // seed of the known-item queries
	// Corpus generates the first n records of the corpus known items
	// are drawn from; the same n gives the same records.
	Corpus func(n int) []Record
	// Serve, when set, starts the server on the seeded store of the known
	// items at dbPath, for the workspace at root, and the known items are
	// searched for through it as well as through the store.
	Serve func(ctx context.Context, dbPath, root string) (Searcher, error)
	// Embed, when set, is the embeddings endpoint hybrid search is
	// compared with keyword search through; EmbedName says what it is.
	Embed     Embedder
	EmbedName string
}

// Searcher searches a seeded store as a client of the server would.
type Searcher interface {
	// Search returns the keys of the best limit records for query, best
	// first.
	Search(ctx context.Context, query string, limit int) ([]string, error)
	// Close stops the server.
	Close() error
}

// storeSearcher searches through memory.Store, the path the tools take.
type storeSearcher struct {
	st *memory.Store
	p  scope.Identity
}

func (s storeSearcher) Search(ctx context.Context, query string, limit int) ([]string, error) {
	hits, err := s.st.Search(ctx, s.p, memory.SearchOptions{Query: query, Limit: limit})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = h.Record.Key
	}
	return keys, nil
}

func (s storeSearcher) Close() error { return s.st.Close() }

// Record is one generated record of the known-item evaluation.
type Record struct {
	Other bool // another workspace's, never visible to the queries
	Write memory.Write
}

// Run evaluates search on the labelled sets and the known items, and
// writes the tables to stdout in markdown.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "memory-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var facts factSet
	if err := readJSON(filepath.Join(cfg.Dir, "facts.json"), &facts); err != nil {
		return err
	}
	var convs conversationSet
	if err := readJSON(filepath.Join(cfg.Dir, "conversations.json"), &convs); err != nil {
		return err
	}
	turns, sessQs, err := loadSessions(filepath.Join(cfg.Dir, "conversations", "sessions.json"))
	if err != nil {
		return err
	}
	// The clock gives each turn its session's date as created_at.
	var clock time.Time
	st, err := open(ctx, filepath.Join(tmp, "labelled.db"), &memory.Options{Now: func() time.Time {
		if clock.IsZero() {
			return time.Now()
		}
		return clock
	}})
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
		docs = append(docs, evalDoc{"facts", m.Key, [index.NumFields]string{m.Key, m.Description, m.Body, strings.Join(m.Tags, " ")}, time.Time{}})
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
			docs = append(docs, evalDoc{c.ID, turnKey(i), [index.NumFields]string{turnKey(i), "", turn, ""}, time.Time{}})
		}
		for _, q := range c.Questions {
			var keys []string
			for _, e := range q.Evidence {
				keys = append(keys, turnKey(e))
			}
			convQs = append(convQs, labelled{p, q.Question, keys})
		}
	}
	var sessDocs []evalDoc
	for _, t := range turns {
		clock = t.created
		p := memory.Project{ID: scope.IdentityOf("/eval/sessions/" + t.conv)}
		if _, _, err := st.Put(ctx, p, memory.Write{Type: memory.Semantic, Key: t.key, Body: t.text}); err != nil {
			return fmt.Errorf("eval session %s %s: %w", t.conv, t.key, err)
		}
		sessDocs = append(sessDocs, evalDoc{t.conv, t.key, [index.NumFields]string{t.key, "", t.text, ""}, t.created})
	}
	clock = time.Time{}
	byKind := map[string][]labelled{}
	ceiling := map[string]float64{}
	var allSess []labelled
	for _, q := range sessQs {
		l := labelled{memory.Project{ID: scope.IdentityOf("/eval/sessions/" + q.conv)}, q.question, q.evidence}
		byKind[q.kind] = append(byKind[q.kind], l)
		allSess = append(allSess, l)
		ceiling[q.kind] += reachable(turns, q)
		ceiling[""] += reachable(turns, q)
	}

	fmt.Fprintf(stdout, "### Search quality\n\nLabelled sets from %s: %d memories with %d queries; %d conversations (a turn per memory) with %d questions; and the harder set of dated sessions, %d turns with %d questions. Recall@k is the mean share of a query's answers in its top k; MRR the mean of 1/rank of its first answer (0 past 10).\n\n",
		cfg.Dir, len(facts.Memories), len(factQs), len(convs.Conversations), len(convQs), len(turns), len(sessQs))
	fmt.Fprintln(stdout, "| set | queries | recall@5 | recall@10 | MRR |")
	fmt.Fprintln(stdout, "|---|--:|--:|--:|--:|")
	for _, set := range []struct {
		name string
		qs   []labelled
	}{{"facts", factQs}, {"conversations", convQs}, {"sessions", allSess}} {
		sc, err := scoreStore(ctx, keywordSearch(st), set.qs, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.3f | %.3f | %.3f |\n", set.name, len(set.qs), sc.r5, sc.r10, sc.mrr)
	}

	fmt.Fprintln(stdout, "\nThe dated sessions by kind of question. The ceiling is the mean share of a question's evidence turns that hold any of its searchable words: what no ranking of words alone can pass.")
	fmt.Fprintln(stdout, "\n| kind | questions | ceiling | recall@5 | recall@10 | MRR |")
	fmt.Fprintln(stdout, "|---|--:|--:|--:|--:|--:|")
	for _, k := range append(slices.Clone(sessionKinds), "") {
		qs, name := byKind[k], k
		if k == "" {
			qs, name = allSess, "all"
		}
		sc, err := scoreStore(ctx, keywordSearch(st), qs, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %s | %d | %.3f | %.3f | %.3f | %.3f |\n", name, len(qs), ceiling[k]/float64(len(qs)), sc.r5, sc.r10, sc.mrr)
	}

	if cfg.Embed != nil {
		if err := writeHybrid(ctx, stdout, stderr, st, cfg.Embed, cfg.EmbedName, kindSets(factQs, convQs, allSess, byKind)); err != nil {
			return err
		}
	}

	fmt.Fprintf(stdout, "\nKnown items of the generated corpus: %d records per size searched for by %d of their words that together name the record, at most %d visible records holding all of them (keywords), or by %d consecutive words of their body (phrase); recall@5 is the share found in the top 5. Any %d words is the keyword query before that condition, which at 20,000 records often names hundreds of records; it is shown for comparison, not as a target.\n\n",
		knownItems, keywordLen, maxHolders, phraseLen, keywordLen)
	fmt.Fprintln(stdout, "| records | searched through | keywords recall@5 | phrase recall@5 | keywords MRR | phrase MRR | any 3 words recall@5 | keyword draws replaced | search p50 |")
	fmt.Fprintln(stdout, "|--:|---|--:|--:|--:|--:|--:|--:|--:|")
	var known []knownCorpus
	for _, n := range cfg.Sizes {
		kc := makeKnown(cfg.Corpus(n), cfg.Seed)
		known = append(known, kc)
		sets, err := knownItemEval(ctx, tmp, kc, cfg.Serve, stderr)
		if err != nil {
			return err
		}
		for _, ki := range sets {
			fmt.Fprintf(stdout, "| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %d | %v |\n", thousands(n), ki.path, ki.kinds[named].r5, ki.kinds[phrased].r5,
				ki.kinds[named].mrr, ki.kinds[phrased].mrr, ki.kinds[anyWords].r5, kc.redrawn, ki.p50)
		}
	}

	fmt.Fprintln(stdout, "\nRanking variants on the engine alone (recall@5 / MRR; sessions also recall@10; known items by keywords and by phrase at each size):")
	head := "\n| variant | facts | conversations | sessions R@5 / R@10 / MRR |"
	rule := "|---|--:|--:|--:|"
	for _, n := range cfg.Sizes {
		head += fmt.Sprintf(" keywords %s | phrase %s |", thousands(n), thousands(n))
		rule += "--:|--:|"
	}
	fmt.Fprintln(stdout, head)
	fmt.Fprintln(stdout, rule)
	for _, v := range variants() {
		f := scoreEngine(docs, factQs, "facts", v)
		c := scoreEngineConvs(docs, convs, v)
		s := scoreEngineSessions(sessDocs, sessQs, v)
		line := fmt.Sprintf("| %s | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f / %.3f |", v.name, f.r5, f.mrr, c.r5, c.mrr, s.r5, s.r10, s.mrr)
		for _, kc := range known {
			k := scoreEngineKnown(kc, v)
			line += fmt.Sprintf(" %.3f | %.3f |", k[named].r5, k[phrased].r5)
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// score sums the judgements of ranked lists.
type score struct {
	r5, r10, mrr float64
	n            int
}

// add judges one ranked list of keys against the relevant ones and
// returns its recall@5.
func (s *score) add(keys, relevant []string) float64 {
	var found5, found10 int
	rr := 0.0
	for i, k := range keys[:min(10, len(keys))] {
		if !slices.Contains(relevant, k) {
			continue
		}
		if rr == 0 {
			rr = 1 / float64(i+1)
		}
		found10++
		if i < 5 {
			found5++
		}
	}
	r5 := float64(found5) / float64(len(relevant))
	s.r5 += r5
	s.r10 += float64(found10) / float64(len(relevant))
	s.mrr += rr
	s.n++
	return r5
}

// mean is the mean of the judgements so far.
func (s score) mean() score {
	n := float64(max(s.n, 1))
	return score{s.r5 / n, s.r10 / n, s.mrr / n, s.n}
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

// The kinds of known-item query.
const (
	named    = iota // keywords that name the record
	phrased         // consecutive words of the body
	anyWords        // keywords drawn without regard to other records
)

// knownSet is what the known-item queries scored through one path.
type knownSet struct {
	path  string // "store" or "MCP"
	kinds [3]score
	p50   time.Duration // the median time of a search
}

// knownQuery is a known-item query and the key of the record it seeks.
type knownQuery struct{ text, key string }

// knownCorpus is the generated corpus of one size and its queries by kind.
type knownCorpus struct {
	recs    []Record
	queries [3][]knownQuery
	redrawn int // keyword draws replaced because they named too many records
}

// makeKnown draws the known-item queries asked of recs: by keywords, by
// an exact phrase, and by any keywords.
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
func makeKnown(recs []Record, seed int64) knownCorpus {
	out := knownCorpus{recs: recs}
	n := len(recs)
	type target struct{ key, text string }
	var targets []target
	r := rand.New(rand.NewSource(seed + 11))
	var held holders
	for _, rec := range recs {
		if !rec.Other {
			w := rec.Write
			held.add(strings.ReplaceAll(w.Key, "-", " "), w.Description, w.Body, strings.Join(w.Tags, " "))
			if r.Intn(n) < 2*knownItems {
				targets = append(targets, target{w.Key, w.Body})
			}
		}
	}
	r.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	targets = targets[:min(knownItems, len(targets))]
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
			out.queries[kind] = append(out.queries[kind], knownQuery{q, tg.key})
		}
	}
	return out
}

// knownItemEval seeds the records of kc into a store and searches for
// the known ones through it, then, with serve, through the server.
func knownItemEval(ctx context.Context, tmp string, kc knownCorpus, serve func(ctx context.Context, dbPath, root string) (Searcher, error), stderr io.Writer) ([]knownSet, error) {
	dir := filepath.Join(tmp, fmt.Sprintf("known-%d", len(kc.recs)))
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		return nil, err
	}
	// The server resolves the root the same way, so both see one project.
	root, err := scope.Root(filepath.Join(dir, "workspace"), "")
	if err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dir, "memory.db")
	st, err := open(ctx, dbPath, nil)
	if err != nil {
		return nil, err
	}
	this := memory.Project{ID: scope.IdentityOf(root)}
	other := memory.Project{ID: scope.IdentityOf(root + "-other")}
	start := time.Now()
	for i, rec := range kc.recs {
		p := this
		if rec.Other {
			p = other
		}
		if _, _, err := st.Put(ctx, p, rec.Write); err != nil {
			st.Close()
			return nil, fmt.Errorf("seed record %d: %w", i, err)
		}
	}
	fmt.Fprintf(stderr, "memory-bench: seeded %d records for the known-item evaluation in %v\n", len(kc.recs), time.Since(start).Round(time.Millisecond))
	s, err := knownSearches(ctx, "store", storeSearcher{st, this.ID}, kc, stderr)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil || serve == nil {
		return []knownSet{s}, err
	}
	srv, err := serve(ctx, dbPath, root)
	if err != nil {
		return nil, err
	}
	m, err := knownSearches(ctx, "MCP", srv, kc, stderr)
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return []knownSet{s, m}, err
}

// knownSearches asks the known-item queries of kc through s.
func knownSearches(ctx context.Context, path string, s Searcher, kc knownCorpus, stderr io.Writer) (knownSet, error) {
	out := knownSet{path: path}
	var took []time.Duration
	for kind, qs := range kc.queries {
		var sc score
		for _, q := range qs {
			start := time.Now()
			keys, err := s.Search(ctx, q.text, 10)
			took = append(took, time.Since(start))
			if err != nil {
				return out, fmt.Errorf("known-item query %q through %s: %w", q.text, path, err)
			}
			if sc.add(keys, []string{q.key}) < 1 && os.Getenv("MEMORY_EVAL_VERBOSE") != "" {
				fmt.Fprintf(stderr, "miss (%s, kind %d): %q want %s got %v\n", path, kind, q.text, q.key, keys[:min(5, len(keys))])
			}
		}
		out.kinds[kind] = sc.mean()
	}
	if len(took) > 0 {
		slices.Sort(took)
		out.p50 = took[len(took)/2].Round(time.Microsecond)
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
	created   time.Time // zero when the set has no dates
}

type variant struct {
	name string
	prm  index.Params
	// undated leaves the records' dates out of the index.
	undated bool
}

// variants are the ranking and each of its parts changed or taken out.
func variants() []variant {
	d := index.DefaultParams
	v := func(name string, change func(p *index.Params)) variant {
		p := d
		change(&p)
		return variant{name: name, prm: p}
	}
	noWhen := d
	noWhen.When = 0
	return []variant{
		{name: "default", prm: d},
		v("saturation k1=1.2", func(p *index.Params) { p.K1 = 1.2 }),
		v("saturation k1=0.3", func(p *index.Params) { p.K1 = 0.3 }),
		v("no coordination of query words", func(p *index.Params) { p.Coord = 0 }),
		v("coordination 0.5", func(p *index.Params) { p.Coord = 0.5 }),
		v("coordination 2", func(p *index.Params) { p.Coord = 2 }),
		v("equal field weights", func(p *index.Params) { p.Weights = [index.NumFields]float64{1, 1, 1, 1} }),
		v("heavier key and description", func(p *index.Params) { p.Weights = [index.NumFields]float64{5, 3, 1, 2} }),
		v("no phrase bonus", func(p *index.Params) { p.Phrase = 0 }),
		v("no length normalisation (b=0)", func(p *index.Params) { p.B = [index.NumFields]float64{} }),
		v("full length normalisation (b=1)", func(p *index.Params) { p.B = [index.NumFields]float64{1, 1, 1, 1} }),
		{name: "no time words for when", prm: noWhen},
		{name: "no date words", prm: d, undated: true},
		{name: "neither", prm: noWhen, undated: true},
		v("no neighbours raised", func(p *index.Params) { p.Context = 0 }),
		v("neighbours raised to 0.5", func(p *index.Params) { p.Context = 0.5 }),
		v("neighbours raised to 0.9", func(p *index.Params) { p.Context = 0.9 }),
	}
}

func partitionOf(docs []evalDoc, part string, undated bool) (*index.Partition, map[int64]string) {
	p := index.NewPartition()
	keys := map[int64]string{}
	for i, d := range docs {
		if d.part == part {
			doc := index.Doc{ID: int64(i), Fields: d.fields, Created: d.created}
			if undated {
				doc.Created = time.Time{}
			}
			p.Put(doc)
			keys[int64(i)] = d.key
		}
	}
	return p, keys
}

func scoreEngine(docs []evalDoc, qs []labelled, part string, v variant) score {
	p, keys := partitionOf(docs, part, v.undated)
	var sc score
	for _, q := range qs {
		sc.add(engineKeys(p, keys, q.query, v), q.relevant)
	}
	return sc.mean()
}

func scoreEngineConvs(docs []evalDoc, convs conversationSet, v variant) score {
	var sc score
	for _, c := range convs.Conversations {
		p, keys := partitionOf(docs, c.ID, v.undated)
		for _, q := range c.Questions {
			var rel []string
			for _, e := range q.Evidence {
				rel = append(rel, turnKey(e))
			}
			sc.add(engineKeys(p, keys, q.Question, v), rel)
		}
	}
	return sc.mean()
}

func scoreEngineSessions(docs []evalDoc, qs []sessionQuery, v variant) score {
	type built struct {
		p    *index.Partition
		keys map[int64]string
	}
	parts := map[string]built{}
	var sc score
	for _, q := range qs {
		b, ok := parts[q.conv]
		if !ok {
			b.p, b.keys = partitionOf(docs, q.conv, v.undated)
			parts[q.conv] = b
		}
		sc.add(engineKeys(b.p, b.keys, q.question, v), q.evidence)
	}
	return sc.mean()
}

// scoreEngineKnown scores the known-item queries of kc on one partition
// of the records they may find.
func scoreEngineKnown(kc knownCorpus, v variant) [3]score {
	var docs []evalDoc
	// Dated an hour apart, as if written over the months before.
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range kc.recs {
		if w := r.Write; !r.Other {
			docs = append(docs, evalDoc{"known", w.Key, [index.NumFields]string{w.Key, w.Description, w.Body, strings.Join(w.Tags, " ")}, at.Add(time.Duration(i) * time.Hour)})
		}
	}
	p, keys := partitionOf(docs, "known", v.undated)
	var out [3]score
	for kind, qs := range kc.queries {
		for _, q := range qs {
			out[kind].add(engineKeys(p, keys, q.text, v), []string{q.key})
		}
		out[kind] = out[kind].mean()
	}
	return out
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

// open opens the SQLite store at path.
func open(ctx context.Context, path string, opts *memory.Options) (*memory.Store, error) {
	b, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return memory.New(ctx, b, opts)
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
