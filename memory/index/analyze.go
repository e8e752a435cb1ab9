package index

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Analyze turns text into the terms the index keeps, in order: folded to
// lower case without diacritics, English stop-words dropped, words lightly
// stemmed, runs of CJK characters cut into overlapping pairs. A word that
// reads as code (a flag like --force, a path like ./cmd/x, an identifier
// with _ or .) is kept whole, unstemmed, and then as its parts, so both the
// exact token and its words can be found.
func Analyze(text string) []string {
	return appendTerms(nil, text, false)
}

// Sequence is Analyze keeping the stop-words in their places, each marked
// by a leading Stop byte: the order phrases are matched in.
func Sequence(text string) []string {
	return appendTerms(nil, text, true)
}

// Stop marks a stop-word in a Sequence.
const Stop = '\x00'

func isStop(t string) bool { return len(t) > 0 && t[0] == Stop }

func appendTerms(out []string, text string, stops bool) []string {
	for len(text) > 0 {
		// Skip space.
		r, n := utf8.DecodeRuneInString(text)
		if unicode.IsSpace(r) {
			text = text[n:]
			continue
		}
		end := SpaceAt(text)
		out = appendRun(out, text[:end], stops)
		text = text[end:]
	}
	return out
}

// SpaceAt is the index of the first space in text, as unicode.IsSpace has
// them, or its length.
func SpaceAt(text string) int {
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			if asciiSpace[c] {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			return i
		}
		i += n
	}
	return len(text)
}

// SpaceLen is how many bytes of space s starts with, as unicode.IsSpace
// has them.
func SpaceLen(s string) int {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if !asciiSpace[c] {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			return i
		}
		i += n
	}
	return len(s)
}

// asciiSpace are the ASCII characters unicode.IsSpace holds spaces.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// closers may end a run without being part of a code token, openers start
// one: sentence punctuation, quotes and brackets.
var closers, openers = asciiSet(".,;:!?)]}'\"`>*"), asciiSet("([{'\"`<*")

func asciiSet(chars string) (set [256]bool) {
	for i := range len(chars) {
		set[chars[i]] = true
	}
	return set
}

// trimSet is s without the leading bytes in lead and the trailing bytes in
// trail.
func trimSet(s string, lead, trail *[256]bool) string {
	for len(s) > 0 && trail[s[len(s)-1]] {
		s = s[:len(s)-1]
	}
	for len(s) > 0 && lead[s[0]] {
		s = s[1:]
	}
	return s
}

// appendRun analyses one run of text between spaces.
func appendRun(out []string, run string, stops bool) []string {
	folded := fold(run)
	// Trailing sentence punctuation and wrapping quotes and brackets are
	// not part of a code token.
	trimmed := trimSet(folded, &openers, &closers)
	var buf [8]string // most runs are a word or a few
	words := buf[:0]
	var cjk bool
	start := -1
	for i, r := range trimmed {
		word := isWordRune(r)
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			words = append(words, trimmed[start:i])
			start = -1
		}
		if isCJK(r) {
			cjk = true
		}
	}
	if start >= 0 {
		words = append(words, trimmed[start:])
	}
	if len(words) == 0 {
		return out
	}
	if !cjk && isCode(trimmed, words) {
		out = append(out, trimmed)
	}
	for _, w := range words {
		out = appendWord(out, w, stops)
	}
	return out
}

// isCode reports whether a run is a code token worth keeping whole: it has
// a letter or digit and joins parts with _, ., /, - or :, or starts with a
// dash or a dot (flags, relative paths).
func isCode(run string, words []string) bool {
	if len(run) > 64 {
		return false
	}
	if len(words) == 1 && words[0] == run {
		return false
	}
	if strings.HasPrefix(run, "-") || strings.HasPrefix(run, "./") || strings.HasPrefix(run, "/") || strings.HasPrefix(run, "~/") {
		return true
	}
	for _, r := range run {
		if !isWordRune(r) && !strings.ContainsRune("_./-:#@+=", r) {
			return false
		}
	}
	return len(words) > 1
}

// appendWord adds one word: CJK runs as pairs, other words stemmed unless
// they are stop-words.
func appendWord(out []string, w string, stops bool) []string {
	// A word may mix CJK and other letters ("go语言"); split them.
	for len(w) > 0 {
		i := strings.IndexFunc(w, isCJK)
		if i < 0 {
			return appendPlain(out, w, stops)
		}
		if i > 0 {
			out = appendPlain(out, w[:i], stops)
			w = w[i:]
		}
		j := strings.IndexFunc(w, func(r rune) bool { return !isCJK(r) })
		if j < 0 {
			j = len(w)
		}
		out = appendCJK(out, w[:j])
		w = w[j:]
	}
	return out
}

func appendPlain(out []string, w string, stops bool) []string {
	if stopWords[w] {
		if stops {
			out = append(out, string(Stop)+w)
		}
		return out
	}
	if len(w) > 64 {
		w = w[:64]
	}
	return append(out, Stem(w))
}

// appendCJK cuts a run of CJK characters into overlapping pairs, or keeps
// a single character alone.
func appendCJK(out []string, run string) []string {
	runes := []rune(run)
	if len(runes) == 1 {
		return append(out, run)
	}
	for k := 0; k+1 < len(runes); k++ {
		out = append(out, string(runes[k:k+2]))
	}
	return out
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// isCJK reports whether r is Han, Hiragana, Katakana or Hangul; all of
// them lie from Hangul's jamo (U+1100) up, above most text.
func isCJK(r rune) bool { return r >= 0x1100 && isCJKTable(r) }

func isCJKTable(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// fold lower-cases s and takes diacritics off Latin letters.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if unicode.Is(unicode.Mn, r) {
			continue // combining marks of decomposed text
		}
		r = unicode.ToLower(r)
		if r >= 0xC0 && r <= 0x17F {
			if f := latin[r-0xC0]; f != "" {
				b.WriteString(f)
				continue
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// latin folds U+00C0..U+017F (lower case) to ASCII.
var latin = func() [0x17F - 0xC0 + 1]string {
	var t [0x17F - 0xC0 + 1]string
	set := func(from, to rune, s string) {
		for r := from; r <= to; r++ {
			t[r-0xC0] = s
		}
	}
	set(0xE0, 0xE5, "a")
	set(0xE6, 0xE6, "ae")
	set(0xE7, 0xE7, "c")
	set(0xE8, 0xEB, "e")
	set(0xEC, 0xEF, "i")
	set(0xF0, 0xF0, "d")
	set(0xF1, 0xF1, "n")
	set(0xF2, 0xF6, "o")
	set(0xF8, 0xF8, "o")
	set(0xF9, 0xFC, "u")
	set(0xFD, 0xFD, "y")
	set(0xFE, 0xFE, "th")
	set(0xFF, 0xFF, "y")
	set(0xDF, 0xDF, "ss")
	set(0x100, 0x105, "a")
	set(0x106, 0x10D, "c")
	set(0x10E, 0x111, "d")
	set(0x112, 0x11B, "e")
	set(0x11C, 0x123, "g")
	set(0x124, 0x127, "h")
	set(0x128, 0x131, "i")
	set(0x132, 0x133, "ij")
	set(0x134, 0x135, "j")
	set(0x136, 0x138, "k")
	set(0x139, 0x142, "l")
	set(0x143, 0x14B, "n")
	set(0x14C, 0x151, "o")
	set(0x152, 0x153, "oe")
	set(0x154, 0x159, "r")
	set(0x15A, 0x161, "s")
	set(0x162, 0x167, "t")
	set(0x168, 0x173, "u")
	set(0x174, 0x175, "w")
	set(0x176, 0x178, "y")
	set(0x179, 0x17E, "z")
	set(0x17F, 0x17F, "s")
	return t
}()

// Stem takes common English inflections off a lower-case word: plurals,
// -ed, -ing and a silent final e (steps 1 and 5a of Porter's algorithm),
// so "tests", "testing" and "tested" meet at "test" and "configure",
// "configured" and "configuring" at "configur". Words of three letters or
// fewer, and words with digits, are left alone.
func Stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return w
		}
	}
	// 1a
	switch {
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ies"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	// 1b
	if strings.HasSuffix(w, "eed") {
		if measure(w[:len(w)-3]) > 0 {
			w = w[:len(w)-1]
		}
	} else if s, ok := cutSuffix(w, "ed", "ing"); ok && hasVowel(s) {
		w = s
		switch {
		case strings.HasSuffix(w, "at"), strings.HasSuffix(w, "bl"), strings.HasSuffix(w, "iz"):
			w += "e"
		case doubleConsonant(w) && !strings.HasSuffix(w, "l") && !strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "z"):
			w = w[:len(w)-1]
		case measure(w) == 1 && cvc(w):
			w += "e"
		}
	}
	// 1c
	if strings.HasSuffix(w, "y") && hasVowel(w[:len(w)-1]) {
		w = w[:len(w)-1] + "i"
	}
	// 5a
	if strings.HasSuffix(w, "e") {
		s := w[:len(w)-1]
		if m := measure(s); m > 1 || m == 1 && !cvc(s) {
			w = s
		}
	}
	return w
}

func cutSuffix(w string, suffixes ...string) (string, bool) {
	for _, s := range suffixes {
		if strings.HasSuffix(w, s) && len(w) > len(s)+1 {
			return w[:len(w)-len(s)], true
		}
	}
	return w, false
}

func consonant(w string, i int) bool {
	switch w[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !consonant(w, i-1)
	}
	return true
}

// measure counts the vowel-consonant sequences in w.
func measure(w string) int {
	m, i, n := 0, 0, len(w)
	for i < n && consonant(w, i) {
		i++
	}
	for i < n {
		for i < n && !consonant(w, i) {
			i++
		}
		if i == n {
			break
		}
		for i < n && consonant(w, i) {
			i++
		}
		m++
	}
	return m
}

func hasVowel(w string) bool {
	for i := range len(w) {
		if !consonant(w, i) {
			return true
		}
	}
	return false
}

func doubleConsonant(w string) bool {
	n := len(w)
	return n >= 2 && w[n-1] == w[n-2] && consonant(w, n-1)
}

// cvc: w ends consonant, vowel, consonant, the last not w, x or y.
func cvc(w string) bool {
	n := len(w)
	if n < 3 || !consonant(w, n-1) || consonant(w, n-2) || !consonant(w, n-3) {
		return false
	}
	c := w[n-1]
	return c != 'w' && c != 'x' && c != 'y'
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
