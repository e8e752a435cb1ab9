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

// indexMore ends a capped index that left rows out. The blank line keeps
// it out of the table, which would otherwise take it for one more row.
func indexMore(n int) string {
	return fmt.Sprintf("\n_%d more records not shown._\n", n)
}

// typeRank orders types as memory.Types lists them; unknown types go last.
func typeRank(t memory.Type) int {
	if i := slices.Index(memory.Types, t); i >= 0 {
		return i
	}
	return len(memory.Types)
}

// Index renders recs, every type, as a markdown table of key, description,
// type and scope, sorted by type (in memory.Types order), then key. It does
// not resolve scopes: pass the effective records. With maxTokens > 0 the
// output is at most maxTokens tokens: rows are added in order until the
// next does not fit, and a last line says how many were left out; if not
// even one row fits, it is the heading and that line, or "" when that does
// not fit either. unlisted counts records the caller left out of recs (it
// read only the first rows); they count as not shown. tokens is the
// cl100k_base count of markdown.
func (w *Weaver) Index(recs []memory.Record, maxTokens, unlisted int) (markdown string, tokens int) {
	unlisted = max(0, unlisted)
	if len(recs) == 0 && unlisted == 0 {
		if maxTokens > 0 && w.Count(indexEmpty) > maxTokens {
			return "", 0
		}
		return indexEmpty, w.Count(indexEmpty)
	}
	type entry struct {
		rank int // typeRank, worked out once rather than per comparison
		rec  *memory.Record
	}
	entries := make([]entry, len(recs))
	for i := range recs {
		entries[i] = entry{typeRank(recs[i].Type), &recs[i]}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(
			cmp.Compare(a.rank, b.rank),
			strings.Compare(string(a.rec.Type), string(b.rec.Type)),
			strings.Compare(a.rec.Key, b.rec.Key),
			cmp.Compare(a.rec.Scope, b.rec.Scope),
			strings.Compare(a.rec.ID, b.rec.ID),
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
	for i, e := range entries {
		r := e.rec
		row := fmt.Sprintf("| %s | %s | %s | %s |\n", cell(r.Key), cell(r.Description), cell(string(r.Type)), r.Scope)
		cost := w.cached(row)
		if maxTokens > 0 {
			res := reserve
			if i == len(entries)-1 && unlisted == 0 {
				res = 0
			}
			if used+cost+res > maxTokens {
				break
			}
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
			md = indexTitle + strings.TrimPrefix(indexMore(total), "\n")
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
