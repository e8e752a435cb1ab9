package memory

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"prom.codes/memory-mcp/scope"
)

// SearchOptions filter a search. Zero values mean no filter.
type SearchOptions struct {
	Query    string
	Type     Type
	Types    []Type // a hit has one of them, when given
	Scope    *scope.Level
	Tags     []string // a hit carries every one of them
	Since    time.Time
	Limit    int // default 10, at most 100
	MinScore float64
	Bodies   bool // hits keep their records' bodies
}

// Hit is one search result. Its Record has no body; Preview is the part of
// the body (or the description) around the first matched word.
type Hit struct {
	Record  Record
	Score   float64 // 0..1, higher is better
	Preview string
}

// column weights for key, description, body and tags: a word in a key or a
// description says more about a record than one deep in its body.
var weights = [4]float64{3, 2, 1, 2}

const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// scoreHalf is the raw BM25 score that maps to 0.5; scores approach 1
	// as the raw score grows.
	scoreHalf = 5.0
)

// Search ranks the effective records matching opts.Query with BM25 over key,
// description, body and tags. The query is natural language: words are
// lower-cased, stop-words dropped, stemmed by the index, and OR-ed, so a
// record sharing any word matches and one sharing the most rare words ranks
// first. Errors: CodeInvalidArgument for a query with no searchable word.
func (s *Store) Search(ctx context.Context, p scope.Identity, opts SearchOptions) ([]Hit, error) {
	terms := Terms(opts.Query)
	if len(terms) == 0 {
		return nil, Errorf(CodeInvalidArgument, "query", "has no searchable words")
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = 10
	}
	if limit > 100 {
		limit = 100
	}
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + t + `"`
	}
	// The filters, checked on candidates after ranking.
	where := effective
	args := s.args(p)
	if opts.Type != "" {
		where += ` AND r.type = @type`
		args = append(args, sql.Named("type", string(opts.Type)))
	}
	if len(opts.Types) > 0 {
		in := make([]string, len(opts.Types))
		for i, t := range opts.Types {
			n := fmt.Sprintf("type%d", i)
			in[i] = "@" + n
			args = append(args, sql.Named(n, string(t)))
		}
		where += ` AND r.type IN (` + strings.Join(in, ", ") + `)`
	}
	if opts.Scope != nil {
		where += ` AND r.scope = @scope`
		args = append(args, sql.Named("scope", int(*opts.Scope)))
	}
	for i, t := range opts.Tags {
		n := fmt.Sprintf("tag%d", i)
		where += ` AND EXISTS (SELECT 1 FROM json_each(r.tags) WHERE json_each.value = @` + n + `)`
		args = append(args, sql.Named(n, t))
	}
	if !opts.Since.IsZero() {
		where += ` AND r.updated_at >= @since`
		args = append(args, sql.Named("since", opts.Since.UnixNano()))
	}
	// Every match is scored from the full-text index alone; the filters
	// (the scope chain above all) are checked on the best-ranked ones, a
	// batch at a time, until limit pass. Joining records to every match
	// costs a row lookup and a shadow check per match, and most matches
	// rank too low to be shown.
	rows, err := s.db.QueryContext(ctx, `SELECT rowid, matchinfo(records_fts, 'pcnalx') FROM records_fts WHERE records_fts MATCH ?`, strings.Join(quoted, " OR "))
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	type scored struct {
		rowid int64
		score float64
	}
	var all []scored
	for rows.Next() {
		var rowid int64
		var mi []byte
		if err := rows.Scan(&rowid, &mi); err != nil {
			rows.Close()
			return nil, fmt.Errorf("search: %w", err)
		}
		sc := normalize(bm25(mi))
		if sc >= opts.MinScore {
			all = append(all, scored{rowid, sc})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return all[i].rowid > all[j].rowid // newer first among equals
	})
	hits := make([]Hit, 0, limit)
	batch := max(4*limit, 64)
	for start := 0; start < len(all) && len(hits) < limit; start += batch {
		chunk := all[start:min(start+batch, len(all))]
		ids := make([]string, len(chunk))
		for i, c := range chunk {
			ids[i] = strconv.FormatInt(c.rowid, 10)
		}
		// The filters and the read are one statement: a row another
		// process deleted since the match, or whose rowid SQLite gave to
		// a new record of another project, is either read as it is now
		// and passes, or not read at all.
		pass, err := s.passing(ctx, `r.rowid IN (`+strings.Join(ids, ",")+`) AND `+where, args)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		for _, c := range chunk {
			r, ok := pass[c.rowid]
			if !ok || len(hits) == limit {
				continue
			}
			h := Hit{Record: r, Score: c.score, Preview: preview(r, terms)}
			if !opts.Bodies {
				h.Record.Body = ""
			}
			hits = append(hits, h)
		}
	}
	return hits, nil
}

// passing returns the records that meet where, by rowid.
func (s *Store) passing(ctx context.Context, where string, args []any) (map[int64]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.rowid, `+cols+` FROM records r WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	pass := map[int64]Record{}
	for rows.Next() {
		var id int64
		r, err := scanRecord(withRowid{rows, &id})
		if err != nil {
			return nil, err
		}
		pass[id] = r
	}
	return pass, rows.Err()
}

// withRowid scans a row whose first column is the rowid, then a record.
type withRowid struct {
	rows  *sql.Rows
	rowid *int64
}

func (w withRowid) Scan(dest ...any) error {
	return w.rows.Scan(append([]any{w.rowid}, dest...)...)
}

// bm25 scores one row from FTS4's matchinfo 'pcnalx' blob.
func bm25(mi []byte) float64 {
	u := func(i int) float64 {
		if 4*i+4 > len(mi) {
			return 0
		}
		return float64(binary.NativeEndian.Uint32(mi[4*i:]))
	}
	p, c := int(u(0)), int(u(1))
	n := u(2)
	avg := 2 + 1 // 'a' starts after p, c, n
	length := avg + c
	x := length + c
	var score float64
	for i := 0; i < p; i++ {
		for j := 0; j < c && j < len(weights); j++ {
			base := x + 3*(i*c+j)
			tf, df := u(base), u(base+2)
			if tf == 0 {
				continue
			}
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			a := u(avg + j)
			if a == 0 {
				a = 1
			}
			l := u(length + j)
			score += weights[j] * idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*l/a))
		}
	}
	return score
}

func normalize(raw float64) float64 {
	if raw <= 0 {
		return 0
	}
	return math.Round(raw/(raw+scoreHalf)*1e4) / 1e4
}

// Terms splits a natural-language query into the lower-cased words worth
// searching for: no stop-words, no duplicates, at most 32.
func Terms(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == 32 {
			break
		}
	}
	return out
}

// preview is a one-line excerpt of about 160 characters around the first
// query word found in the body, else the body's start.
func preview(r Record, terms []string) string {
	text := strings.Join(strings.Fields(r.Body), " ")
	if text == "" {
		text = r.Description
	}
	lower := strings.ToLower(text)
	at := -1
	for _, t := range terms {
		stem := t
		if len(stem) > 4 {
			stem = stem[:len(stem)-2] // crude, but the index stems; near enough to place a window
		}
		if i := strings.Index(lower, stem); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	const width = 160
	start := 0
	if at > 40 {
		start = at - 40
	}
	// Move to a rune and word boundary.
	for start > 0 && start < len(text) && text[start-1] != ' ' {
		start++
	}
	end := min(start+width, len(text))
	for end < len(text) && end > start && text[end]&0xC0 == 0x80 {
		end--
	}
	out := text[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been
	before being below between both but by can could did do does doing down during each few for from further had has
	have having he her here hers herself him himself his how i if in into is it its itself just me more most my
	myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such
	than that the their theirs them themselves then there these they this those through to too under until up very
	was we were what when where which while who whom why will with would you your yours yourself yourselves
	s t`) {
		m[w] = true
	}
	return m
}()
