// Package secrets detects secret-shaped values — API keys, tokens, private
// keys, credentials in URLs, headers and connection strings — so they are
// never stored as memories.
//
// It is a leaf: standard library only, no I/O. Detection is a deny-list of
// known shapes, each with a stable rule id; obvious placeholders (sk-xxxx,
// <YOUR_TOKEN>, ${API_KEY}, password=changeme...) are let through, because
// notes about configuration mention them all the time and they protect
// nothing.
//
// Every rule names literal keywords, as gitleaks rules do. Scan finds them all
// in one case-folded pass over the input and runs a rule's regexp only where
// one of its keywords occurs, anchored there, so ordinary prose and code cost
// a table lookup per byte. Field rules (password=, api_key: …) cut the text
// their pattern sees at the end of the first value after the keyword, so
// input packed with keywords costs a few bytes per hit, not a whole span.
//
// One rule is generic: a high-entropy value assigned to a secret-named field
// (client_secret, SECRET_KEY, api_key, …). It yields to any specific rule
// that matches inside the value, so a known token keeps its own name.
package secrets

import (
	"slices"
	"strings"
)

// Finding names the rule a value matched. It never carries the matched text:
// both fields come from a fixed table, so a Finding is safe to log or return.
type Finding struct {
	Rule        string // stable rule id, e.g. "github-pat"
	Description string // short human text, e.g. "GitHub personal access token"
}

// Scan reports the first secret-shaped value in s, or ok=false.
//
// "First" is the match that starts earliest in s; where several rules match
// at the same place the most specific wins. Scan is deterministic and never
// panics, whatever the input (binary and invalid UTF-8 included).
func Scan(s string) (f Finding, ok bool) {
	if len(s) < 2 {
		return Finding{}, false
	}
	x := index
	sc := scanner{s: s}
	// A generic rule (a secret-named field) defers to a specific rule that
	// matches inside its value, so a named token keeps its own name.
	var weak *rule
	weakEnd := 0
	prev := foldByte[s[0]]
	for i := 1; i < len(s); i++ {
		if weak != nil && i-1 >= weakEnd {
			break
		}
		c := foldByte[s[i]]
		if x.pairs[int(prev)<<2|int(c)>>6]>>(c&63)&1 == 0 {
			prev = c
			continue
		}
		if r, end := sc.ruleAt(x, i-1, c); r != nil {
			if !r.generic {
				return Finding{Rule: r.id, Description: r.desc}, true
			}
			if weak == nil {
				weak, weakEnd = r, end
			}
		}
		prev = c
	}
	if weak != nil {
		return Finding{Rule: weak.id, Description: weak.desc}, true
	}
	return Finding{}, false
}

// scanner is the state of one Scan.
type scanner struct {
	s string
	// stop is the offset of the next byte no token can hold (a blank or a
	// quote) at or after the last hit. Hits come in order, so finding it is
	// amortised over the whole scan instead of repeated per hit.
	stop int
}

// tokenEnd returns where a token starting at s[i] must end at the latest.
func (sc *scanner) tokenEnd(i int) int {
	if sc.stop <= i {
		sc.stop = len(sc.s)
		if j := strings.IndexAny(sc.s[i:], " \t\r\n\"'`<>"); j >= 0 {
			sc.stop = i + j
		}
	}
	return sc.stop
}

// ruleAt returns the most specific rule that matches at s[i:], or nil, and
// where its match ends; c1 is s[i+1] folded.
func (sc *scanner) ruleAt(x *keywordIndex, i int, c1 byte) (*rule, int) {
	best, bestEnd := -1, 0
	for _, h := range x.heads[foldByte[sc.s[i]]] {
		if h.folded[1] != c1 || !h.at(sc.s, i) {
			continue
		}
		for _, ri := range h.rules {
			if best >= 0 && ri > best {
				continue
			}
			if end := sc.match(&rules[ri], i, i+len(h.folded)); end >= 0 {
				best, bestEnd = ri, end
			}
		}
	}
	if best < 0 {
		return nil, 0
	}
	return &rules[best], bestEnd
}

// Rules lists every rule id, sorted, each once (a provider's shapes may
// take several table entries under one id).
func Rules() []string {
	ids := make([]string, len(rules))
	for i, r := range rules {
		ids[i] = r.id
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// match reports where r's match ends if r matches at s[i:], where one of its
// keywords is, or -1; the keyword ends at kwEnd.
func (sc *scanner) match(r *rule, i, kwEnd int) int {
	s := sc.s
	if r.token && !leftBound(s, i) && !(r.glued && !isAlnum(s[i-1])) || r.ahead != nil && !r.ahead(s, kwEnd) {
		return -1
	}
	end := min(len(s), i+r.span)
	if r.token {
		end = min(end, sc.tokenEnd(i))
	}
	if r.bounded {
		e, n := assignEnd(s, kwEnd)
		if n < r.minValue || r.pre != nil && !r.pre(s[e-1-n:e-1]) {
			return -1
		}
		end = min(end, e)
	}
	m := r.re().FindStringSubmatchIndex(s[i:end])
	if m == nil {
		return -1
	}
	for k := range m {
		if m[k] >= 0 {
			m[k] += i
		}
	}
	if r.token && m[1] < len(s) && isWord(s[m[1]]) && !(r.glued && !isAlnum(s[m[1]])) {
		return -1
	}
	if r.check != nil && !r.check(s, m) {
		return -1
	}
	return m[1]
}

// leftBound reports whether a token may start at s[i]: at the start, after a
// non-word byte, or after an escape such as \n that glues it to the previous
// line inside a JSON or shell string.
func leftBound(s string, i int) bool {
	if i == 0 || !isWord(s[i-1]) {
		return true
	}
	c := s[i-1]
	return i >= 2 && s[i-2] == '\\' && (c == 'n' || c == 'r' || c == 't')
}

// head is one keyword and the rules it triggers.
type head struct {
	folded string // lower-case form, compared against folded input
	exact  string // original form, also required unless fold
	fold   bool
	rules  []int // indexes into rules, ascending
}

// at reports whether the keyword occurs at s[i:].
func (h *head) at(s string, i int) bool {
	if len(s)-i < len(h.folded) {
		return false
	}
	if !h.fold {
		return s[i:i+len(h.exact)] == h.exact
	}
	for j := 0; j < len(h.folded); j++ {
		if foldByte[s[i+j]] != h.folded[j] {
			return false
		}
	}
	return true
}

// keywordIndex finds keyword hits in one pass: pairs is a bitset of every
// keyword's first two folded bytes, which rejects almost every position of
// ordinary text with one lookup; heads lists the keywords by first byte.
type keywordIndex struct {
	pairs [256 * 256 / 64]uint64
	heads [256][]*head
}

var index = buildIndex(rules)

func buildIndex(rs []rule) *keywordIndex {
	x := new(keywordIndex)
	byKey := map[string]*head{}
	for ri, r := range rs {
		for _, kw := range r.keywords {
			if len(kw) < 2 {
				panic("secrets: keyword shorter than two bytes in rule " + r.id)
			}
			key := kw
			if r.fold {
				key = "\x00" + strings.ToLower(kw) // folded and exact heads differ
			}
			h := byKey[key]
			if h == nil {
				h = &head{folded: strings.ToLower(kw), exact: kw, fold: r.fold}
				byKey[key] = h
				x.heads[h.folded[0]] = append(x.heads[h.folded[0]], h)
				c0, c1 := int(h.folded[0]), int(h.folded[1])
				x.pairs[c0<<2|c1>>6] |= 1 << (c1 & 63)
			}
			if !slices.Contains(h.rules, ri) {
				h.rules = append(h.rules, ri)
			}
		}
	}
	return x
}

// foldByte lower-cases ASCII letters and leaves every other byte alone, so
// offsets in folded and original text agree.
var foldByte = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i + 'a' - 'A')
		}
	}
	return t
}()
