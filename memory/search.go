package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"prom.codes/memory-mcp/memory/excerpt"
	"prom.codes/memory-mcp/memory/index"
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
	// NoPreview leaves hits without previews, for a caller that reads the
	// bodies itself.
	NoPreview bool
}

// Hit is one search result. Its Record has no body, and unless the search
// asked for bodies it holds only the id, scope, type, key and description
// (what a hit shows); Preview is the part of the body (or the description)
// around the first matched word.
type Hit struct {
	Record  Record
	Score   float64 // 0..1, higher is better
	Preview string
	Why     Why
}

// Why says why a record matched: which of the query's words it holds, and
// in which fields.
type Why struct {
	Terms  []string // query words, as the query spelled them
	Fields []string // key, description, body, tags
}

// Search ranks the effective records matching opts.Query with BM25F over
// key, description, body and tags. The query is natural language: words are
// folded (case and diacritics), stop-words dropped, stemmed, CJK text cut
// into pairs, and OR-ed, so a record sharing any word matches, one sharing
// the most rare words ranks first, and one holding the query's words side
// by side as a phrase ranks above one holding them apart. Only this
// project's records and the shared scopes' are read or counted.
// Errors: CodeInvalidArgument for a query with no searchable word.
func (s *Store) Search(ctx context.Context, p scope.Identity, opts SearchOptions) ([]Hit, error) {
	return retry(ctx, s, func() ([]Hit, error) { return s.search1(ctx, p, opts) })
}

func (s *Store) search1(ctx context.Context, p scope.Identity, opts SearchOptions) ([]Hit, error) {
	terms, words := excerpt.Analyze(opts.Query)
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
	keys := visibleBuckets(p)
	global := globalFrom(p)
	buckets, err := s.search.catchUp(ctx, s.db, keys)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	now := s.now().UnixNano()
	since := int64(0)
	if !opts.Since.IsZero() {
		since = opts.Since.UnixNano()
	}
	accept := func(c index.Candidate) bool {
		in := buckets[c.Part]
		m := &in.meta[c.Tag]
		if keys[c.Part] == "" && scope.Level(m.scope) < global {
			return false // another kind of caller's level in the global bucket
		}
		if !m.visible(now) {
			return false
		}
		if opts.Type != "" && in.typ(m) != opts.Type || len(opts.Types) > 0 && !slices.Contains(opts.Types, in.typ(m)) {
			return false
		}
		if opts.Scope != nil && int(m.scope) != int(*opts.Scope) || m.updated < since {
			return false
		}
		for _, t := range opts.Tags {
			if !slices.Contains(in.tagSets[m.tags], t) {
				return false
			}
		}
		// The scope chain: a narrower visible record of the same name
		// shadows this one.
		shadowed := false
		for i, b := range buckets {
			b.sameName(m.name, func(o *docMeta) bool {
				if keys[i] == "" && scope.Level(o.scope) < global {
					return true
				}
				if o.scope < m.scope && b.typ(o) == in.typ(m) && string(b.key(o)) == string(in.key(m)) && o.visible(now) {
					shadowed = true
				}
				return !shadowed
			})
			if shadowed {
				return false
			}
		}
		return true
	}
	parts := make([]*index.Partition, len(buckets))
	for i, b := range buckets {
		parts[i] = b.part
	}
	s.search.mu.RLock()
	phrase := index.Sequence(opts.Query)
	if len(phrase) > 64 {
		phrase = nil // a long text is not a phrase to look for; its words are
	}
	results := index.Search(parts, index.Query{Terms: terms, Phrase: phrase, K: limit, Accept: accept}, index.DefaultParams)
	s.search.mu.RUnlock()
	for i, r := range results {
		if r.Score < opts.MinScore {
			results = results[:i]
			break
		}
	}
	if len(results) == 0 {
		return []Hit{}, nil
	}
	// The rows are read by rowid alone: the index was current when the
	// search began and has judged visibility and the scope chain, and a
	// record changed since is shown as it is now. One deleted since, or
	// whose rowid now holds a record of another project or one expired,
	// is left out.
	recs, err := s.readHits(ctx, keys, buckets, global, results, opts.Bodies)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	hits := make([]Hit, 0, len(results))
	var in []string
	for i, r := range results {
		rec, cut := recs[i].Record, recs[i].cut
		if rec.ID == "" {
			continue
		}
		h := Hit{Record: rec, Score: r.Score}
		if !opts.NoPreview {
			if cut && strings.TrimSpace(rec.Body) == "" {
				if rec.Body, err = s.wholeBody(ctx, r.ID, rec.ID); err != nil {
					return nil, fmt.Errorf("search: %w", err)
				}
				cut = false
			}
			// The preview looks only for the words the index found in the
			// text it shows: looking for the others read all of it in vain.
			text, shown := rec.Body, index.Body
			if strings.TrimSpace(text) == "" {
				text, shown, cut = rec.Description, index.Description, false
			}
			in = in[:0]
			for i, t := range r.Terms {
				if r.TermFields[i]&(1<<shown) != 0 {
					in = append(in, t)
				}
			}
			var ok bool
			if h.Preview, ok = excerpt.Of(text, cut, in, words); !ok {
				if text, err = s.wholeBody(ctx, r.ID, rec.ID); err != nil {
					return nil, fmt.Errorf("search: %w", err)
				}
				h.Preview = preview(Record{Body: text, Description: rec.Description}, in, words)
			}
		}
		h.Why.Terms = make([]string, 0, len(r.Terms))
		for _, t := range r.Terms {
			if w := words[t]; !slices.Contains(h.Why.Terms, w) {
				h.Why.Terms = append(h.Why.Terms, w)
			}
		}
		h.Why.Fields = make([]string, len(r.Fields))
		for i, f := range r.Fields {
			h.Why.Fields[i] = f.String()
		}
		if !opts.Bodies {
			h.Record.Body = ""
		}
		hits = append(hits, h)
	}
	return hits, nil
}

// visibleBuckets are the partitions whose records p may see, narrowest
// first: p's own, then those of its workspace and tenant where they have
// their own, and the global one.
func visibleBuckets(p scope.Identity) []string {
	var keys []string
	for l := scope.Project; l <= scope.System; l++ {
		if k := Bucket(p, l); (k != "" || l == scope.System) && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// readHits reads the records of results, in their order, that live in one
// of the buckets keys (whose indexes are buckets), a record in the global
// bucket only from level global up; a record not read is left zero. With
// full, each record is read whole; without, only what a hit shows: its
// id, scope, type, key, description and body (for the preview), from the
// buckets' cards where they have them, a card keeping only the start of
// the body.
func (s *Store) readHits(ctx context.Context, keys []string, buckets []*bucketIndex, global scope.Level, results []index.Result, full bool) ([]hitRecord, error) {
	now := s.now()
	out := make([]hitRecord, len(results))
	ok := func(project string, r Record) bool {
		return slices.Contains(keys, project) && (project != "" || r.Scope >= global) && (r.ExpiresAt == nil || r.ExpiresAt.After(now))
	}
	var gen uint64
	missing := len(results)
	if !full {
		cards := &s.search.cards
		for _, b := range buckets {
			// Before any card of b is kept, so that every change b
			// applies from now on drops its record's card.
			b.cards.CompareAndSwap(nil, cards)
		}
		// Taken before the cards are looked at: a card dropped after the
		// look is not kept again from the row read.
		gen = cards.generation()
		for i, res := range results {
			for j, b := range buckets {
				if c, found := cards.get(b, res.ID); found {
					if r := c.record(); ok(keys[j], r) {
						out[i] = hitRecord{r, int64(len(r.Body)) < c.bodyLen}
					}
					missing--
					break
				}
			}
		}
		if missing == 0 {
			return out, nil
		}
	}
	_, hitsStmt, cardStmt, err := s.search.statements(ctx, s.db)
	if err != nil {
		return nil, err
	}
	ids := make([]byte, 0, 8*missing+2)
	ids = append(ids, '[')
	for i, r := range results {
		if !full && out[i].ID != "" {
			continue
		}
		if len(ids) > 1 {
			ids = append(ids, ',')
		}
		ids = strconv.AppendInt(ids, r.ID, 10)
	}
	ids = append(ids, ']')
	stmt := cardStmt
	if full {
		stmt = hitsStmt
	}
	rows, err := stmt.QueryContext(ctx, string(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// Scanned into once per call, not once per row: each is handed to
	// Scan behind an interface, and would be allocated anew.
	var id int64
	var project string
	var c card
	whole := newRecordScan(&id, &project)
	for rows.Next() {
		var r Record
		if full {
			if r, err = whole.scan(rows); err != nil {
				return nil, err
			}
		} else {
			if err := rows.Scan(&id, &project, &c.id, &c.scope, &c.typ, &c.key, &c.desc, &c.body, &c.expires); err != nil {
				return nil, err
			}
			c.bodyLen = int64(len(c.body))
			if j := slices.Index(keys, project); j >= 0 {
				kept := c
				if len(kept.body) > previewKeep {
					// Whole characters.
					n := previewKeep
					for n > 0 && !utf8.RuneStart(kept.body[n]) {
						n--
					}
					kept.body = strings.Clone(kept.body[:n])
				}
				s.search.cards.keep(buckets[j], id, &kept, gen)
			}
			r = c.record()
		}
		if !ok(project, r) {
			continue
		}
		for i, res := range results {
			if res.ID == id {
				out[i] = hitRecord{r, !full && int64(len(r.Body)) < c.bodyLen}
				break
			}
		}
	}
	return out, rows.Err()
}

// record is the record c shows, its body cut to its start.
func (c *card) record() Record {
	r := Record{ID: c.id, Scope: scope.Level(c.scope), Type: types[c.typ], Key: c.key, Description: c.desc, Body: c.body, ExpiresAt: fromNanos(c.expires)}
	if r.Type == "" {
		r.Type = Type(c.typ)
	}
	return r
}

// previewKeep is how many bytes of a hit's body its card keeps for the
// preview: most matches lie within them, and a hit whose excerpt needs
// more has its whole body read.
const previewKeep = 768

// hitRecord is a record as a search reads it; with cut, its body is only
// the start its card kept.
type hitRecord struct {
	Record
	cut bool
}

// wholeBody reads the body of the record id at rowid, for the preview of
// a hit whose excerpt the start of its body did not settle; "" if the
// record is gone. The id is checked: by now the rowid may hold another
// record, of another project.
func (s *Store) wholeBody(ctx context.Context, rowid int64, id string) (string, error) {
	var body string
	err := s.db.QueryRowContext(ctx, `SELECT body FROM records WHERE rowid = $1 AND id = $2`, rowid, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

// types shares one copy of each type's name among the records read.
var types = map[string]Type{string(Working): Working, string(Episodic): Episodic, string(Semantic): Semantic, string(Procedural): Procedural}

// withRowid scans a row whose first columns are the rowid and the
// project, then a record.
type withRowid struct {
	rows    interface{ Scan(...any) error }
	rowid   *int64
	project *string
}

func (w withRowid) Scan(dest ...any) error {
	return w.rows.Scan(append([]any{w.rowid, w.project}, dest...)...)
}

// Terms splits a natural-language query into the distinct terms worth
// searching for, folded, without stop-words, stemmed; at most 32.
func Terms(q string) []string {
	terms, _ := excerpt.Analyze(q)
	var out []string
	for _, t := range terms {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// preview is a one-line excerpt of about 160 characters around the first
// matched query word found in the body, else the body's start. Only the
// excerpt's own stretch of the body is copied and folded into one line.
func preview(r Record, terms []string, words map[string]string) string {
	text := r.Body
	if strings.TrimSpace(text) == "" {
		text = r.Description
	}
	p, _ := excerpt.Of(text, false, terms, words)
	return p
}
