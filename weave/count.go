package weave

import (
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// cl100k loads the encoding once per process, however many Weavers there
// are, from the ranks tiktoken-go-loader embeds in the binary: nothing is
// downloaded.
var cl100k = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	defer loaded.Store(true)
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	return tiktoken.GetEncoding(tiktoken.MODEL_CL100K_BASE)
})

// loaded is set once the encoding's load has finished, well or not.
var loaded atomic.Bool

// Ready reports, without waiting, whether the encoding's load has finished.
func (w *Weaver) Ready() bool { return loaded.Load() }

// Preload loads the encoding if it is not loaded yet. It is safe to call any
// number of times, from any goroutine.
func (w *Weaver) Preload() { w.load() }

// Err loads the encoding if need be and returns why it could not be loaded,
// or nil. While it is non-nil every count is the estimate ceil(bytes/2): it
// overstates prose and code about twofold, so blocks carry less but stay
// within budget, except for text dense in emoji or rare scripts, which can
// take more tokens than that.
func (w *Weaver) Err() error {
	_, err := w.load()
	return err
}

// maxPiece bounds the bytes tiktoken-go is given at once. Its byte-pair
// merge takes time quadratic in the length of a pre-token, and a pre-token
// is as long as a run of one class: a paragraph of CJK with no
// punctuation, a line of dashes, a page of one letter. Text is cut into
// pieces of at most this many bytes, which keeps each merge short.
const maxPiece = 256

// Count returns the number of cl100k_base tokens in s, treating special
// tokens such as <|endoftext|> as plain text, as a model reading the block
// would see them.
//
// It counts s in pieces (see maxPiece). A piece ends where a pre-token of
// the encoding ends whatever follows it (see cleanCut), so on ordinary
// text the pieces' counts add up to tiktoken's count of the whole. Only a
// run with no such place in maxPiece bytes is cut inside a pre-token, at
// a character boundary. Its two sides can then merge into fewer tokens
// than the whole would, by one at most on the long runs of every class
// the tests try, so each such cut adds one token and the count stays at
// or above the encoding's: a block counted so keeps its cap.
func (w *Weaver) Count(s string) int {
	if s == "" {
		return 0
	}
	enc, err := w.load()
	if err != nil {
		return (len(s) + 1) / 2
	}
	return count(enc, s, maxPiece)
}

// count is Count with pieces of at most max bytes.
func count(enc *tiktoken.Tiktoken, s string, max int) int {
	n := 0
	for len(s) > 0 {
		end, clean := nextPiece(s, max)
		n += len(enc.EncodeOrdinary(s[:end]))
		if !clean {
			n++
		}
		s = s[end:]
	}
	return n
}

// nextPiece returns the end of the first piece of s, at most max bytes
// long unless its first character is longer, and whether it ends cleanly:
// at the end of s or at a cleanCut. It prefers the last clean cut within
// max bytes, and cuts at the last character boundary when there is none.
func nextPiece(s string, max int) (end int, clean bool) {
	if len(s) <= max {
		return len(s), true
	}
	last := 0 // the last character boundary within max bytes
	for i := max; i > 0; i-- {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if last == 0 {
			last = i
		}
		if cleanCut(s, i) {
			return i, true
		}
	}
	if last == 0 { // one character, of invalid bytes, longer than max
		_, w := utf8.DecodeRuneInString(s)
		return w, false
	}
	return last, false
}

// cleanCut reports whether cl100k_base's pre-tokenizer, the pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// ends a pre-token at s[i], a character boundary, whatever text follows
// and precedes: then s[:i] and s[i:] split into the same pre-tokens as s,
// and their counts add up to its count. That holds after a letter not
// followed by a letter, after a digit not followed by a digit, and before
// a space that follows anything but white space. In each case no
// alternative can take both characters, and the pre-token that ends at i
// is one of the first four, which neither look ahead nor end on a
// quantifier over what follows.
func cleanCut(s string, i int) bool {
	before, _ := utf8.DecodeLastRuneInString(s[:i])
	after, _ := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(before):
		return !unicode.IsLetter(after)
	case unicode.IsNumber(before):
		return !unicode.IsNumber(after)
	}
	return after == ' ' && !unicode.IsSpace(before) && !unicode.Is(unicode.Z, before)
}
