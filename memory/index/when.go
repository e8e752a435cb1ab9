package index

import (
	"strings"
	"time"
)

// A person often asks when something happened. Two things help such a
// question find its record: the record's date is indexed as words (its
// year and its month's name, with its tags), so "in October" finds what
// was written then; and a question opening with "when" favours, among the
// best candidates, the records whose text says when.

// asksWhen reports whether a query's sequence opens with "when".
func asksWhen(seq []string) bool {
	return len(seq) > 0 && seq[0] == string(Stop)+"when"
}

// timeWords are words that say when something happened, stemmed.
var timeWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`january february march april may june july august september october
	november december monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
	tonight morning afternoon evening night week weekend month year spring summer autumn winter ago
	last next since christmas easter birthday`) {
		timeWords[Stem(w)] = true
	}
}

// timeTerm reports whether term t says when: a time word, or a number as
// in "the 22nd" or "2024".
func timeTerm(t []byte) bool {
	return len(t) > 0 && t[0] >= '0' && t[0] <= '9' || timeWords[string(t)]
}

// holdsTime reports whether the text of document n of p, its description
// or body, holds a term that says when. Its tags are left out: they hold
// its date.
func holdsTime(p *Partition, n uint32) bool {
	var buf []uint32
	for _, f := range []Field{Description, Body} {
		buf = p.field(n, f, buf[:0])
		for _, t := range buf {
			if !p.stop[t] && timeTerm(p.dict.bytes(t)) {
				return true
			}
		}
	}
	return false
}

// dateTerms are the terms a document written at t is found by: its year
// and its month's name.
func dateTerms(t time.Time) []string {
	return Sequence(t.Format("2006 January"))
}
