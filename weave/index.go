package weave

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"prom.codes/memory-mcp/memory"
)

const (
	indexHead  = "# Memory index\n\n| key | description | type | scope |\n|---|---|---|---|\n"
	indexTitle = "# Memory index\n\n"
	indexEmpty = "# Memory index\n\nNo records yet.\n"
)

// indexMore ends a capped index that left rows out, and says where the
// rest is. The blank line keeps it out of the table, which would otherwise
// take it for one more row.
func indexMore(n int) string {
	return fmt.Sprintf("\n_… and %d more: read memory://index._\n", n)
}

// indexNone is the line under the title of a capped index that has no room
// for a single row.
func indexNone(n int) string {
	return fmt.Sprintf("_%d records not shown: read memory://index._\n", n)
}

// IndexTypes is the order Index lists types in: what is most worth reading
// first, so that a capped index keeps it. A caller that reads only the
// head of the records for a capped index reads them in this order.
var IndexTypes = []memory.Type{memory.Procedural, memory.Semantic, memory.Episodic, memory.Working}

// indexRank orders types as IndexTypes lists them; unknown types go last.
func indexRank(t memory.Type) int {
	if i := slices.Index(IndexTypes, t); i >= 0 {
		return i
	}
	return len(IndexTypes)
}

// Index renders recs, every type, as a markdown table of key, description,
// type and scope. Types come in IndexTypes order: procedures, facts,
// episodes, working notes. Within a type records come in the order a
// recall offers them: procedures by use count, then recency, the others by
// confidence, then use count, then recency (the later of the last change
// and the last use); ties end on key, scope and id. It does not resolve
// scopes: pass the effective records. With maxTokens > 0 the output is at
// most maxTokens tokens: rows are added in order until the next does not
// fit, and a last line says how many were left out and that
// memory://index has them all; if not even one row fits, it is the
// heading and that line, or "" when that does not fit either. unlisted
// counts records the caller left out of recs (it read only the first
// rows); they count as not shown. tokens is the cl100k_base count of
// markdown.
func (w *Weaver) Index(recs []memory.Record, maxTokens, unlisted int) (markdown string, tokens int) {
	unlisted = max(0, unlisted)
	if len(recs) == 0 && unlisted == 0 {
		if maxTokens > 0 && w.Count(indexEmpty) > maxTokens {
			return "", 0
		}
		return indexEmpty, w.Count(indexEmpty)
	}
	type entry struct {
		rank int // indexRank, worked out once rather than per comparison
		it   item
	}
	entries := make([]entry, len(recs))
	for i := range recs {
		r := &recs[i]
		it := item{rec: r, proc: r.Type == memory.Procedural, rel: -1, conf: r.Confidence, use: r.UseCount, recency: r.UpdatedAt.UnixNano()}
		if r.LastAccessedAt != nil {
			it.recency = max(it.recency, r.LastAccessedAt.UnixNano())
		}
		entries[i] = entry{indexRank(r.Type), it}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(
			cmp.Compare(a.rank, b.rank),
			strings.Compare(string(a.it.rec.Type), string(b.it.rec.Type)),
			packOrder(&a.it, &b.it),
		)
	})

	// Rows end in a newline and start with '|', so their counts add up
	// exactly (see the fixed parts of a block); the final count below is
	// still what enforces a cap.
	rows := make([]string, 0, len(entries))
	used := w.cached(indexHead)
	var reserve int
	if maxTokens > 0 {
		reserve = w.cached(indexMore(len(entries) + unlisted))
	}
	render := func(e entry) string {
		r := e.it.rec
		return fmt.Sprintf("| %s | %s | %s | %s |\n", cell(r.Key), cell(r.Description), cell(string(r.Type)), r.Scope)
	}
	for i, e := range entries {
		row := render(e)
		cost := w.cached(row)
		if maxTokens > 0 && used+cost+reserve > maxTokens {
			// No room for this row and the "more" line; but with no
			// records unlisted, the rest may fit whole, needing no
			// "more" line at all.
			if unlisted == 0 {
				var rest []string
				restCost := 0
				for _, e := range entries[i:] {
					r := render(e)
					if restCost += w.cached(r); used+restCost > maxTokens {
						break
					}
					rest = append(rest, r)
				}
				if len(rest) == len(entries)-i {
					rows, used = append(rows, rest...), used+restCost
				}
			}
			break
		}
		used += cost
		rows = append(rows, row)
	}
	if maxTokens <= 0 && unlisted == 0 {
		md := indexHead + strings.Join(rows, "")
		if w.Err() != nil {
			return md, w.Count(md) // estimates, unlike counts, do not add up
		}
		return md, used
	}
	total := len(entries) + unlisted
	for n := len(rows); ; n-- {
		var md string
		switch {
		case n == 0:
			md = indexTitle + indexNone(total)
		case n < total:
			md = indexHead + strings.Join(rows[:n], "") + indexMore(total-n)
		default:
			md = indexHead + strings.Join(rows, "")
		}
		t := w.Count(md)
		if maxTokens <= 0 || t <= maxTokens {
			return md, t
		}
		if n == 0 {
			return "", 0
		}
	}
}

// cell makes s safe inside a table cell: a pipe would start a new cell and
// a newline would end the row, so pipes are escaped and runs of white space,
// newlines included, become one space. Backslashes right before a pipe are
// doubled, or "\|" in a description would escape our escape.
func cell(s string) string {
	s = oneLine(s)
	if !strings.Contains(s, "|") {
		return s
	}
	var b strings.Builder
	run := 0 // backslashes seen just before this byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			run++
			b.WriteByte('\\')
			continue
		case '|':
			b.WriteString(strings.Repeat(`\`, run))
			b.WriteString(`\|`)
		default:
			b.WriteByte(s[i])
		}
		run = 0
	}
	return b.String()
}
