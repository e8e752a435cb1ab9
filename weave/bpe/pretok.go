package bpe

import (
	"unicode"
	"unicode/utf8"
)

// cl100k_base splits text into pre-tokens with the pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// which tiktoken-go runs with regexp2, a backtracking engine: at each
// position the first alternative that matches wins, quantifiers are greedy
// and give characters back one at a time. nextPiece does the same by hand.
// The classes are regexp2's: \p{L} and \p{N} are Go's unicode.L and
// unicode.N, \s is unicode.IsSpace, and (?i) compares unicode.ToLower of
// the input with the lower-case pattern. Every character starts a match of
// some alternative, so the pieces tile the text.

// Character classes, as bits.
const (
	cLetter  = 1 << iota // \p{L}
	cNumber              // \p{N}
	cSpace               // \s
	cNewline             // \r or \n (also cSpace)
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range t {
		t[r] = slowClass(rune(r))
	}
	return t
}()

func slowClass(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return cSpace | cNewline
	case unicode.Is(unicode.L, r):
		return cLetter
	case unicode.Is(unicode.N, r):
		return cNumber
	case unicode.IsSpace(r):
		return cSpace
	}
	return 0
}

// at decodes the rune at s[i] and returns its class and width.
func at(s string, i int) (r rune, c uint8, w int) {
	if b := s[i]; b < utf8.RuneSelf {
		return rune(b), asciiClass[b], 1
	}
	r, w = utf8.DecodeRuneInString(s[i:])
	return r, slowClass(r), w
}

// nextPiece returns the end of the pre-token that starts at i < len(s).
func nextPiece(s string, i int) int {
	r, c, w := at(s, i)

	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' && i+1 < len(s) {
		r1, _, w1 := at(s, i+1)
		j := i + 1 + w1
		switch unicode.ToLower(r1) {
		case 's', 't', 'm', 'd':
			return j
		case 'r', 'v', 'l':
			if j < len(s) {
				r2, _, w2 := at(s, j)
				want := 'e'
				if unicode.ToLower(r1) == 'l' {
					want = 'l'
				}
				if unicode.ToLower(r2) == want {
					return j + w2
				}
			}
		}
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c&cLetter != 0 {
		return letters(s, i+w)
	}
	if c&(cNumber|cNewline) == 0 && i+w < len(s) {
		if _, c1, w1 := at(s, i+w); c1&cLetter != 0 {
			return letters(s, i+w+w1)
		}
	}

	// \p{N}{1,3}
	if c&cNumber != 0 {
		j := i + w
		for k := 1; k < 3 && j < len(s); k++ {
			_, c1, w1 := at(s, j)
			if c1&cNumber == 0 {
				break
			}
			j += w1
		}
		return j
	}

	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`: the class of the rest is 0. A space
	// first is not of that class, so only the branch that takes it can
	// match.
	j := i
	if r == ' ' {
		j++
	}
	k := j
	for k < len(s) {
		_, c1, w1 := at(s, k)
		if c1 != 0 {
			break
		}
		k += w1
	}
	if k > j {
		for k < len(s) && (s[k] == '\r' || s[k] == '\n') {
			k++
		}
		return k
	}

	// Only white space is left to start here (c&cSpace != 0).
	// \s*[\r\n]+ ends after the run's last \r or \n, if it has one.
	// \s+(?!\S) takes the whole run at the end of the text, else gives its
	// last character back to the non-space that follows, which a run of
	// one character cannot do: then \s+ takes it alone.
	end, nl, last := i, -1, i
	for end < len(s) {
		_, c1, w1 := at(s, end)
		if c1&cSpace == 0 {
			break
		}
		if c1&cNewline != 0 {
			nl = end + w1
		}
		last = end
		end += w1
	}
	switch {
	case nl >= 0:
		return nl
	case end == len(s) || last == i:
		return end
	}
	return last
}

// letters returns the end of the run of letters that starts at i.
func letters(s string, i int) int {
	for i < len(s) {
		_, c, w := at(s, i)
		if c&cLetter == 0 {
			break
		}
		i += w
	}
	return i
}
