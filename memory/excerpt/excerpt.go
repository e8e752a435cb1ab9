// Package excerpt finds, in a record's text, the stretch to show with a
// search hit: around the first query word it holds, on one line. It is
// pure: text and terms in, an excerpt out.
//
// It imports the standard library and memory/index (the analyzer, so that
// the words it looks for are the ones the index matched).
package excerpt

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"prom.codes/memory-mcp/memory/index"
)

// Analyze returns the query's terms in order (at most 32 distinct)
// and, for each term, the query word it came from.
func Analyze(q string) ([]string, map[string]string) {
	var terms []string
	words := map[string]string{}
	for _, w := range strings.Fields(q) {
		for _, t := range index.Analyze(w) {
			if _, ok := words[t]; !ok {
				if len(words) == 32 {
					return terms, words
				}
				words[t] = strings.Trim(w, ".,;:!?()[]{}'\"`<>*")
			}
			terms = append(terms, t)
		}
	}
	return terms, words
}

// Of is a one-line excerpt of text, of about 160 characters around the
// first of words (the query word each term came from, see Analyze) found
// in it, else its start. With cut, text is only the start of the text to
// show, and ok reports whether the excerpt is the one the
// whole text gives: it is when the match and the whole excerpt, the word
// after it included, lie within the start.
func Of(text string, cut bool, terms []string, words map[string]string) (p string, ok bool) {
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if cut && text == "" {
		return "", false
	}
	at := -1
	if len(terms) > 0 {
		probes := make([]string, 0, 2*len(terms))
		ascii := true
		longest := 0
		for _, t := range terms {
			for _, probe := range [2]string{t, strings.ToLower(words[t])} {
				// A probe holding another as its prefix ("tests" after
				// "test") is found no earlier than that one.
				if probe != "" && !slices.ContainsFunc(probes, func(q string) bool { return strings.HasPrefix(probe, q) }) {
					probes = append(probes, probe)
					ascii = ascii && isASCII(probe)
					longest = max(longest, len(probe))
				}
			}
		}
		if cut && !ascii {
			return "", false // folding may move matches; the whole text is needed
		}
		// ASCII words are found in the body as it is, ignoring case, without
		// a folded copy of the whole body.
		lower, index := text, indexFoldASCII
		if !ascii {
			lower, index = strings.ToLower(text), strings.Index
		}
		for _, probe := range probes {
			// Only the text before the earliest match so far.
			in := lower
			if at >= 0 {
				in = lower[:min(at+len(probe), len(lower))]
			}
			if i := index(in, probe); i >= 0 && (at < 0 || i < at) {
				at = i
			}
		}
		// Every match beginning before at ends within the start of the
		// text only if at is that far from its end.
		if cut && (at < 0 || at+longest > len(text)) {
			return "", false
		}
		if len(lower) != len(text) {
			at = min(at, len(text)) // folding changed the length; near enough
		}
	}
	const width = 160
	start := 0
	if at > 40 {
		// Back 40 bytes, then on to the start of a word.
		start = at - 40
		for start < len(text) && !unicode.IsSpace(rune(text[start-1])) {
			start++
		}
	}
	var b strings.Builder
	b.Grow(width + 8)
	// The marks of what was left out are ASCII dots, not "…": a string
	// with a byte outside ASCII in it takes a JSON decoder's slower path
	// (the go-sdk's takes twice as long over a page of previews).
	if start > 0 {
		b.WriteString("...")
	}
	n := 0 // bytes of the excerpt
	more := false
	for rest := text[start:]; ; {
		// The words of rest, as strings.FieldsSeq gives them.
		rest = rest[index.SpaceLen(rest):]
		if rest == "" {
			break
		}
		end := index.SpaceAt(rest)
		w := rest[:end]
		rest = rest[end:]
		if n > 0 {
			if n+1 >= width {
				more = true
				break
			}
			b.WriteByte(' ')
			n++
		}
		if n+len(w) > width {
			cut := width - n
			for cut > 0 && !utf8.RuneStart(w[cut]) {
				cut--
			}
			b.WriteString(w[:cut])
			more = true
			break
		}
		b.WriteString(w)
		n += len(w)
	}
	// Stopping short of the end, the excerpt has seen every word it
	// shows end, and the start of the next: a longer text gives the same.
	if cut && !more {
		return "", false
	}
	if more {
		b.WriteString("...")
	}
	return b.String(), true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// indexFoldASCII is the index of the first instance of probe, a lower-case
// ASCII word, in s, with ASCII letters of s compared in either case.
func indexFoldASCII(s, probe string) int {
	if probe == "" {
		return 0
	}
	first, firstUp := probe[0], probe[0]
	if 'a' <= first && first <= 'z' {
		firstUp = first - 'a' + 'A'
	}
	end := len(s) - len(probe) // the last index probe may start at
	// The next index at or after i holding first, and firstUp; -1 if none
	// is left. Each is searched for again only once i has passed it.
	lo, up := -2, -2
	next := func(c byte, from int) int {
		if k := strings.IndexByte(s[from:end+1], c); k >= 0 {
			return from + k
		}
		return -1
	}
	for i := 0; i <= end; {
		if lo != -1 && lo < i {
			lo = next(first, i)
		}
		if firstUp == first {
			up = lo
		} else if up != -1 && up < i {
			up = next(firstUp, i)
		}
		switch {
		case lo < 0 && up < 0:
			return -1
		case lo < 0 || up >= 0 && up < lo:
			i = up
		default:
			i = lo
		}
		j := 1
		for ; j < len(probe); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != probe[j] {
				break
			}
		}
		if j == len(probe) {
			return i
		}
		i++
	}
	return -1
}
