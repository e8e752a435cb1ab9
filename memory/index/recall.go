package index

import (
	"math"
	"slices"
	"strings"
)

// This file holds what helps a query find what the person meant when its
// words are not quite the record's: questions asked in conversation,
// words in another inflection, a pool of candidates re-ranked by where
// the words stand and when the record was written.

// questionWords open a question; the Sequence marks them as stop-words.
var questionWords = map[string]bool{
	"what": true, "when": true, "where": true, "who": true, "whom": true, "which": true,
	"why": true, "how": true, "did": true, "does": true, "do": true, "is": true, "was": true,
}

// fillers are words of a question that ask rather than name: "what
// happened", "tell me", "what did she say". A record holding them is no
// likelier the answer.
var fillers = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`happen tell say said mention talk thing kind sort remember recall
	know think ask`) {
		fillers[Stem(w)] = true
	}
}

// isQuestion reports whether a query's sequence reads as a question: it
// opens with a question word.
func isQuestion(seq []string) bool {
	return len(seq) > 0 && isStop(seq[0]) && questionWords[seq[0][1:]]
}

// asksWhen reports whether a query's sequence asks when.
func asksWhen(seq []string) bool {
	return len(seq) > 0 && seq[0] == string(Stop)+"when"
}

// dropFillers is terms without the fillers, unless nothing else is left.
func dropFillers(terms []string) []string {
	var out []string
	for _, t := range terms {
		if !fillers[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return terms
	}
	return out
}

// suffixes are derivational endings Stem leaves on and their
// replacements, tried longest first on a query term that no document
// holds: a person asks about "rehearsal" where the record says
// "rehearsing", "cyclist" where it says "cycle".
var suffixes = [][2]string{
	{"ational", "ate"}, {"ization", "ize"}, {"fulness", "ful"}, {"iveness", "ive"},
	{"ation", "ate"}, {"ement", ""}, {"ness", ""}, {"ment", ""}, {"ship", ""},
	{"ical", "ic"}, {"ful", ""}, {"ist", ""}, {"ism", ""}, {"ity", ""}, {"ive", ""},
	{"ous", ""}, {"ion", ""}, {"ian", ""}, {"al", ""}, {"er", ""}, {"or", ""}, {"ly", ""}, {"i", ""},
}

// folds are the forms of term t tried, in order, when no document holds t.
func folds(t string) []string {
	if len(t) <= 4 {
		return nil
	}
	var out []string
	for _, s := range suffixes {
		base, ok := strings.CutSuffix(t, s[0])
		if !ok || len(base) < 3 {
			continue
		}
		out = append(out, Stem(base+s[1]))
		if s[1] == "" {
			out = append(out, Stem(base+"e"))
		}
	}
	return out
}

// foldAbsent replaces each term no partition holds by the first of its
// folds one does, and returns, by replaced term, the term it replaced.
func foldAbsent(parts []*Partition, terms []string) ([]string, map[string]string) {
	var from map[string]string
	held := func(t string) bool {
		for _, p := range parts {
			if id, ok := p.dict.lookup(t); ok && p.terms[id].df > 0 {
				return true
			}
		}
		return false
	}
	out := terms
	for i, t := range terms {
		if held(t) {
			continue
		}
		for _, f := range folds(t) {
			if f != t && held(f) {
				if from == nil {
					out = slices.Clone(terms)
					from = map[string]string{}
				}
				out[i] = f
				from[f] = t
				break
			}
		}
	}
	return out, from
}

// timeWords are words that say when something happened; a record holding
// one, or a number, answers "when" better than one that does not.
var timeWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`january february march april may june july august september october
	november december monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
	tonight morning afternoon evening night week weekend month year spring summer autumn winter ago
	last next since christmas easter birthday`) {
		timeWords[Stem(w)] = true
	}
}

// timeTerm reports whether term t says when.
func timeTerm(t string) bool {
	if timeWords[t] {
		return true
	}
	return len(t) > 0 && t[0] >= '0' && t[0] <= '9'
}

// rerank adds to each candidate the bonuses for a pool: proximity of the
// query's terms within a field, a time expression for a question asking
// when, and recency. Each is a multiple of top, the best score, so they
// weigh alike whatever the idf of the words.
func (s *scorer) rerank(parts []*Partition, cands []cand, ids [][]uint32, when bool, top float64) {
	prm := s.prm
	for i := range cands {
		c := &cands[i]
		p := parts[c.part]
		if prm.Near > 0 {
			c.score += prm.Near * top * nearShare(p, c.doc, ids[c.part], prm.Window)
		}
		if when && prm.When > 0 && holdsTime(p, c.doc) {
			c.score += prm.When * top
		}
		if prm.Recency > 0 && len(p.docs) > 0 {
			c.score += prm.Recency * top * float64(c.doc+1) / float64(len(p.docs))
		}
	}
}

// holdsTime reports whether the text of document n of p, its
// description or body, holds a word that says when.
func holdsTime(p *Partition, n uint32) bool {
	var buf []uint32
	for _, f := range []Field{Description, Body} {
		buf = p.field(n, f, buf[:0])
		for _, t := range buf {
			if !p.stop[t] && timeTerm(p.dict.at(t)) {
				return true
			}
		}
	}
	return false
}

// nearShare is the share of the pairs of distinct query terms (ids, in
// p; MaxUint32 for one p lacks) that stand within window terms of each
// other in one field of document n.
func nearShare(p *Partition, n uint32, ids []uint32, window int) float64 {
	var q []uint32
	for _, id := range ids {
		if id != math.MaxUint32 && !p.stop[id] && !slices.Contains(q, id) {
			q = append(q, id)
		}
	}
	if len(q) < 2 {
		return 0
	}
	last := make([]int, len(q))
	near := make([]bool, len(q)*len(q))
	var buf []uint32
	for f := range NumFields {
		for i := range last {
			last[i] = -window - 1
		}
		buf = p.field(n, f, buf[:0])
		for j, t := range buf {
			i := slices.Index(q, t)
			if i < 0 {
				continue
			}
			last[i] = j
			for k := range q {
				if k != i && j-last[k] <= window {
					near[min(i, k)*len(q)+max(i, k)] = true
				}
			}
		}
	}
	pairs := 0
	for _, b := range near {
		if b {
			pairs++
		}
	}
	return float64(pairs) / float64(len(q)*(len(q)-1)/2)
}

// feedback picks, from the best few candidates, up to prm.Expand terms the
// query lacks, by their summed weight in those records: pseudo-relevance
// feedback.
func feedback(parts []*Partition, cands []cand, uniq []string, n float64, prm Params) []string {
	best := slices.Clone(cands)
	slices.SortFunc(best, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	best = best[:min(len(best), prm.FeedbackDocs)]
	weight := map[string]float64{}
	var buf []uint32
	for _, c := range best {
		p := parts[c.part]
		seen := map[uint32]bool{}
		for f := range NumFields {
			buf = p.field(c.doc, f, buf[:0])
			for _, t := range buf {
				if p.stop[t] || seen[t] {
					continue
				}
				seen[t] = true
				df := float64(p.terms[t].df)
				if df < 2 {
					continue // a word of one record only says nothing of others
				}
				w := p.dict.at(t)
				if !slices.Contains(uniq, w) {
					weight[w] += math.Log(1 + (n-df+0.5)/(df+0.5))
				}
			}
		}
	}
	var out []string
	for w := range weight {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b string) int {
		if weight[a] != weight[b] {
			if weight[a] > weight[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return out[:min(len(out), prm.Expand)]
}
