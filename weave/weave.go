// Package weave turns memory records into the prompt-ready recall block and
// the memory index: records and a token budget in, markdown out.
//
// It is pure: no database, no files, no network. Tokens are counted with
// cl100k_base by github.com/pkoukk/tiktoken-go, from the ranks
// github.com/pkoukk/tiktoken-go-loader embeds in the binary, so nothing is
// ever downloaded. Text reaches tiktoken-go in pieces of a few hundred
// bytes, cut where the count stays exact, because its byte-pair merge is
// quadratic in the length of a run of one class (see Weaver.Count). If
// the encoding cannot be loaded, counts fall back to a conservative
// estimate (see Weaver.Err).
//
// It imports memory and scope of this module, and tiktoken-go.
//
// # Choices
//
//   - Packing stops at the first record that does not fit, rather than
//     skipping it and trying smaller ones, so the block never shows a
//     lower-ranked record while hiding a higher-ranked one. The price: one
//     oversized top record leaves only the "more not shown" line.
//   - Facts come before procedures, each in its own section. Records named in
//     Options.Relevant are packed first, in relevance order whatever their
//     type, and shown at the top of their type's section.
//   - Body headings are demoted below the block's own: ATX headings gain three
//     '#' (capped at six), except inside fenced code; a one-line setext
//     heading that starts a paragraph becomes the matching ATX heading.
//     Multi-line setext headings and headings inside block quotes or list
//     items are left as they are.
//   - With nothing eligible the block is one line, "No project memory yet.";
//     when no record fits, it is the title and the "more not shown" line, or
//     failing that the one line "_N memories not shown._"; when even that
//     does not fit, it is empty. Each is used only if it fits.
package weave

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/pkoukk/tiktoken-go"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// DefaultMaxTokens is the budget used when Options.MaxTokens is not positive.
const DefaultMaxTokens = 1500

// Options control one weave.
type Options struct {
	// MaxTokens is a hard cap on the whole block, counted with cl100k_base;
	// <= 0 means DefaultMaxTokens.
	MaxTokens int
	// Relevant holds record ids in relevance order, as a search returned
	// them. Those present among the woven records come first, in this order;
	// the rest follow in the usual order. Unknown ids are ignored.
	Relevant []string
	// Unlisted counts eligible records the caller did not pass in because
	// they could not fit anyway (it reads only the head of each type's
	// order); they count as omitted.
	Unlisted int
}

// Block is a woven recall block.
type Block struct {
	Markdown string   // the whole block
	Tokens   int      // cl100k_base tokens of Markdown, as Count counts them; always <= the cap
	Included []string // ids of the records woven in, in the order shown
	Omitted  int      // eligible records left out for lack of room
}

// maxCached bounds the count cache; it is cleared when full, since a
// process that sees that many distinct sections is better served by a
// fresh start than by bookkeeping for eviction.
const maxCached = 100_000

// Weaver counts tokens with cl100k_base and weaves blocks. It caches the
// count of every section and index row it renders, so a record is tokenized
// once per version however often it is woven. It is safe for concurrent use.
// Make one with New; the zero Weaver is not ready for use.
type Weaver struct {
	load func() (*tiktoken.Tiktoken, error) // swapped in tests to simulate a failed load
	seed maphash.Seed

	mu     sync.Mutex
	counts map[countKey]int
}

// countKey names a piece of rendered markdown by a hash of its content
// rather than by record id and updated_at: everything that shapes a section
// (key, description, scope, body, demotion) is in the text, so the key
// changes exactly when the count can, even for an edit that left updated_at
// alone. A 64-bit collision could only skew packing, never the cap, which
// is enforced by counting the finished block.
type countKey struct {
	sum uint64
	n   int
}

// New returns a Weaver. It does not load the encoding; the first Count,
// Weave or Index, or Preload, does.
func New() *Weaver {
	return &Weaver{load: cl100k, seed: maphash.MakeSeed(), counts: make(map[countKey]int)}
}

// cached counts s through the cache.
func (w *Weaver) cached(s string) int {
	k := countKey{maphash.String(w.seed, s), len(s)}
	w.mu.Lock()
	n, ok := w.counts[k]
	w.mu.Unlock()
	if ok {
		return n
	}
	n = w.Count(s)
	w.mu.Lock()
	if len(w.counts) >= maxCached {
		clear(w.counts)
	}
	w.counts[k] = n
	w.mu.Unlock()
	return n
}

// The fixed parts of a block. Every part, sections included, ends in a
// newline and starts with a non-space, which makes cl100k counts add up
// across parts exactly (no pre-tokenizer match crosses such a boundary), so
// packing by summed part counts almost never needs the final recount to drop
// anything. Summed, Count's part counts are never below the encoding's
// count of the block, since each is never below the part's.
const (
	title        = "# Project memory\n\n"
	factsHead    = "## Facts\n\n"
	proceduresHd = "## Procedures\n\n"
)

// emptyBlock is the whole block when there is nothing to weave: saying so
// tells an agent that memory works and is empty, where "" looks like a fault.
const emptyBlock = "No project memory yet.\n"

// moreLine ends a block that left records out, and says how to reach them.
func moreLine(n int) string {
	return fmt.Sprintf("_%d more not shown: call memory_search or memory_read with a key._\n", n)
}

// notShown is the whole block when not even the title and the "more" line
// fit: a budget of a few tokens still learns that memories exist.
func notShown(n int) string {
	return fmt.Sprintf("_%d memories not shown._\n", n)
}

// item is an eligible record with its sort keys worked out once, so
// ordering touches no more than this struct until keys tie.
type item struct {
	rec     *memory.Record
	proc    bool
	rel     int // position in Options.Relevant, or -1
	conf    float64
	use     int64
	recency int64 // the later of LastAccessedAt and UpdatedAt
}

// packOrder is the order records are offered to the budget: relevant ones by
// relevance, then facts, then procedures. Ties end on key, scope and id so
// the same input always weaves the same block.
func packOrder(a, b *item) int {
	if (a.rel >= 0) != (b.rel >= 0) {
		if a.rel >= 0 {
			return -1
		}
		return 1
	}
	if a.rel >= 0 {
		return cmp.Compare(a.rel, b.rel)
	}
	if a.proc != b.proc {
		if b.proc {
			return -1
		}
		return 1
	}
	if !a.proc {
		if c := cmp.Compare(b.conf, a.conf); c != 0 {
			return c
		}
	}
	return cmp.Or(
		cmp.Compare(b.use, a.use),
		cmp.Compare(b.recency, a.recency),
		strings.Compare(a.rec.Key, b.rec.Key),
		cmp.Compare(a.rec.Scope, b.rec.Scope),
		strings.Compare(a.rec.ID, b.rec.ID),
	)
}

// queue hands out items in packOrder. A heap rather than a sort because
// packing usually stops after a few dozen records out of thousands: building
// it is linear and each record taken costs a logarithm.
type queue []item

func (q queue) down(i int) {
	for {
		m, l := i, 2*i+1
		if l < len(q) && packOrder(&q[l], &q[m]) < 0 {
			m = l
		}
		if r := l + 1; r < len(q) && packOrder(&q[r], &q[m]) < 0 {
			m = r
		}
		if m == i {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}

func (q queue) init() {
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *queue) pop() item {
	old := *q
	it := old[0]
	old[0] = old[len(old)-1]
	*q = old[:len(old)-1]
	q.down(0)
	return it
}

// Weave packs the facts (semantic) and procedures (procedural) among recs
// into a markdown block of at most opts.MaxTokens tokens. Other types are
// ignored. recs are expected to be the scope chain's resolved, unexpired
// winners, one per id; Weave neither resolves scopes nor checks expiry.
// Should ids repeat anyway, only the best-ranked copy is woven. It never
// fails: a budget too small for anything gives a smaller, possibly empty,
// block.
//
// Only records up to the first that does not fit are rendered and counted,
// so beyond a linear pass over recs the cost follows the budget, not
// len(recs).
func (w *Weaver) Weave(recs []memory.Record, opts Options) Block {
	limit := opts.MaxTokens
	if limit <= 0 {
		limit = DefaultMaxTokens
	}
	rel := make(map[string]int, len(opts.Relevant))
	for i, id := range opts.Relevant {
		if _, ok := rel[id]; !ok {
			rel[id] = i
		}
	}
	q := make(queue, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		if r.Type != memory.Semantic && r.Type != memory.Procedural {
			continue
		}
		it := item{rec: r, proc: r.Type == memory.Procedural, rel: -1, conf: r.Confidence, use: r.UseCount, recency: r.UpdatedAt.UnixNano()}
		if r.LastAccessedAt != nil {
			it.recency = max(it.recency, r.LastAccessedAt.UnixNano())
		}
		if len(rel) > 0 {
			if p, ok := rel[r.ID]; ok {
				it.rel = p
			}
		}
		q = append(q, it)
	}
	if len(q) == 0 && opts.Unlisted <= 0 {
		return w.fit(limit, 0, emptyBlock)
	}
	eligible := len(q) + max(0, opts.Unlisted)
	q.init()

	// Pack by summed part counts, keeping room for the "more" line unless
	// the record at hand is the last one.
	moreCost := w.cached(moreLine(eligible))
	used := w.cached(title)
	var packed []item
	var sections []string // rendered, parallel to packed
	woven := map[string]bool{}
	var facts, procs bool // whether each section has begun
	for len(q) > 0 {
		it := q.pop()
		if woven[it.rec.ID] {
			eligible-- // a repeated id: not a record of its own
			continue
		}
		sec := section(it.rec)
		cost := w.cached(sec)
		if it.proc && !procs {
			cost += w.cached(proceduresHd)
		} else if !it.proc && !facts {
			cost += w.cached(factsHead)
		}
		reserve := moreCost
		if len(q) == 0 && opts.Unlisted <= 0 {
			reserve = 0
		}
		if used+cost+reserve > limit {
			break
		}
		used += cost
		woven[it.rec.ID] = true
		packed = append(packed, it)
		sections = append(sections, sec)
		procs = procs || it.proc
		facts = facts || !it.proc
	}

	// Parts add up exactly (see the fixed parts of a block), so the block's
	// count is the sum of its parts' cached counts, but for the last part,
	// whose final blank line assemble trims. Only that part is counted anew;
	// tokenizing the whole block on every recall would cost more than the
	// rest of the weave.
	for n := len(packed); ; n-- {
		md, ids, parts := assemble(packed[:n], sections[:n], eligible-n)
		if n == 0 {
			return w.fit(limit, eligible, md, notShown(eligible))
		}
		var t int
		if w.Err() != nil {
			t = w.Count(md) // estimates do not add up
		} else {
			for _, p := range parts[:len(parts)-1] {
				t += w.cached(p)
			}
			if last := parts[len(parts)-1]; strings.HasSuffix(md, last) {
				t += w.cached(last)
			} else {
				t += w.cached(last[:len(last)-1])
			}
		}
		if t <= limit {
			return Block{Markdown: md, Tokens: t, Included: ids, Omitted: eligible - n}
		}
	}
}

// fit returns the first of mds, blocks with no records in them, that fits
// the limit, else the empty block.
func (w *Weaver) fit(limit, omitted int, mds ...string) Block {
	for _, md := range mds {
		if t := w.Count(md); t <= limit {
			return Block{Markdown: md, Tokens: t, Omitted: omitted}
		}
	}
	return Block{Omitted: omitted}
}

// assemble lays out the packed items, facts then procedures, with the "more"
// line when omitted > 0. It returns the ids in the order shown.
func assemble(packed []item, sections []string, omitted int) (string, []string, []string) {
	var b strings.Builder
	b.WriteString(title)
	parts := []string{title}
	ids := make([]string, 0, len(packed))
	for _, proc := range []bool{false, true} {
		head := factsHead
		if proc {
			head = proceduresHd
		}
		for i, it := range packed {
			if it.proc != proc {
				continue
			}
			if head != "" {
				b.WriteString(head)
				parts = append(parts, head)
				head = ""
			}
			b.WriteString(sections[i])
			parts = append(parts, sections[i])
			ids = append(ids, it.rec.ID)
		}
	}
	if omitted > 0 {
		b.WriteString(moreLine(omitted))
		parts = append(parts, moreLine(omitted))
	}
	// Sections end in a blank line to separate them; the block itself ends
	// in a single newline.
	md := b.String()
	if strings.HasSuffix(md, "\n\n") {
		md = md[:len(md)-1]
	}
	return md, ids, parts
}

// section renders one record: a heading with its key, description (unless
// it only repeats the key) and, when not project, its scope; then its body
// with headings demoted.
func section(r *memory.Record) string {
	var b strings.Builder
	b.WriteString("### ")
	b.WriteString(r.Key)
	if d := oneLine(r.Description); d != "" && !strings.EqualFold(d, r.Key) {
		b.WriteString(" — ")
		b.WriteString(d)
	}
	if r.Scope != scope.Project {
		fmt.Fprintf(&b, " (%s scope)", r.Scope)
	}
	b.WriteString("\n\n")
	if body := demote(tidy(r.Body)); body != "" {
		b.WriteString(body)
		b.WriteString("\n\n")
	}
	return b.String()
}

// oneLine folds runs of white space, newlines included, into single spaces,
// so a description can never break out of its heading.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// tidy normalises line endings and drops leading blank lines and trailing
// white space, so every section has the same shape whatever the body's
// edges. Leading indentation of the first line is kept: it may be code.
func tidy(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimRight(s, " \t\n\f\v")
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok || strings.TrimSpace(line) != "" {
			return s
		}
		s = rest
	}
}
