// Package bpe counts tokens of OpenAI's cl100k_base encoding, exactly as
// tiktoken encodes ordinary text, without regular expressions and without
// tables the garbage collector has to scan.
//
// The ranks are those compiled into the binary by tiktoken-go-loader's
// assets, so nothing is ever downloaded. They are held in three
// pointer-free slices: the bytes of every token end to end, the offset of
// each token in them by rank, and an open-addressing hash table from a
// token's bytes to its rank. The 100,256 tokens take about 2 MB of heap and
// cost a garbage collection nothing to mark.
//
// It imports only the standard library and tiktoken-go-loader's assets.
package bpe

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/bits"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// Encoding holds the ranks of a byte-pair encoding. It is immutable once
// loaded and safe for concurrent use.
type Encoding struct {
	blob  []byte   // every token's bytes, in rank order
	offs  []uint32 // token r is blob[offs[r]:offs[r+1]]
	table []uint32 // slots: 0 when empty, else a hash tag above rank+1
	mask  uint64   // len(table)-1
	seed  maphash.Seed
}

// Slots keep rank+1 in their low rankBits bits and the top bits of the
// token's hash above them, so most probes that miss are told apart without
// comparing bytes.
const (
	rankBits = 17
	rankMask = 1<<rankBits - 1
)

// CL100K parses the cl100k_base ranks embedded in the binary. Each call
// parses them anew; callers keep the result. Its errors say what in the
// embedded file could not be read.
func CL100K() (*Encoding, error) {
	const name = "cl100k_base.tiktoken"
	open := func() (io.ReadCloser, error) { return assets.Assets.Open(name) }
	e, err := parse(open)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return e, nil
}

// Parse reads ranks in tiktoken's format: one token per line, its bytes in
// standard base64, a space, and its rank. Ranks must run 0, 1, 2... in line
// order, as they do in every published encoding.
func Parse(data []byte) (*Encoding, error) {
	return parse(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// parse reads the ranks twice, first to size the slices exactly, then to
// fill them, so loading leaves no grown-and-dropped arrays behind and never
// holds the whole file in memory.
func parse(open func() (io.ReadCloser, error)) (*Encoding, error) {
	n, size := 0, 0
	err := eachLine(open, func(tok, rank []byte) error {
		if r, ok := atoi(rank); !ok || r != n {
			return fmt.Errorf("line %d: rank %q, want %d", n+1, rank, n)
		}
		m, err := decodedLen(tok)
		if err != nil {
			return fmt.Errorf("line %d: %w", n+1, err)
		}
		n, size = n+1, size+m
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n == 0 || n >= rankMask || size > math.MaxUint32 {
		return nil, fmt.Errorf("%d tokens of %d bytes: out of range", n, size)
	}
	slots := 1 << bits.Len(uint(2*n)) // at most half full, so probes stay short
	e := &Encoding{
		blob:  make([]byte, size),
		offs:  make([]uint32, 1, n+1),
		table: make([]uint32, slots),
		mask:  uint64(slots - 1),
		seed:  maphash.MakeSeed(),
	}
	off := 0
	err = eachLine(open, func(tok, _ []byte) error {
		r := len(e.offs) - 1
		if r >= n {
			return fmt.Errorf("ranks changed while read")
		}
		m, err := base64.StdEncoding.Decode(e.blob[off:], tok)
		if err != nil {
			return fmt.Errorf("line %d: %w", r+1, err)
		}
		off += m
		e.offs = append(e.offs, uint32(off))
		if _, dup := e.Rank(e.token(r)); dup {
			return fmt.Errorf("line %d: token repeated", r+1)
		}
		e.insert(r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(e.offs) != n+1 {
		return nil, fmt.Errorf("ranks changed while read")
	}
	return e, nil
}

// eachLine calls f with the token and rank fields of every non-empty line.
func eachLine(open func() (io.ReadCloser, error), f func(tok, rank []byte) error) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		tok, rank, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return fmt.Errorf("line %q: no space", line)
		}
		if err := f(tok, rank); err != nil {
			return err
		}
	}
	return sc.Err()
}

// atoi parses a decimal rank without the string strconv would need.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// decodedLen is the exact length of padded standard base64 once decoded.
func decodedLen(b []byte) (int, error) {
	if len(b) == 0 || len(b)%4 != 0 {
		return 0, fmt.Errorf("token %q is not padded base64", b)
	}
	n := len(b) / 4 * 3
	for i := len(b) - 1; i >= len(b)-2 && b[i] == '='; i-- {
		n--
	}
	return n, nil
}

// Len returns the number of tokens.
func (e *Encoding) Len() int { return len(e.offs) - 1 }

// token returns the bytes of the token of rank r.
func (e *Encoding) token(r int) []byte { return e.blob[e.offs[r]:e.offs[r+1]] }

func (e *Encoding) insert(r int) {
	h := maphash.Bytes(e.seed, e.token(r))
	tag := hashTag(h)
	for i := h & e.mask; ; i = (i + 1) & e.mask {
		if e.table[i] == 0 {
			e.table[i] = tag | uint32(r+1)
			return
		}
	}
}

// hashTag is the part of a token's hash its slot keeps above its rank.
func hashTag(h uint64) uint32 { return uint32(h>>(64-(32-rankBits))) << rankBits }

// Rank returns the rank of the token whose bytes are b, if there is one.
func (e *Encoding) Rank(b []byte) (int, bool) {
	r, ok := lookup(e, b, maphash.Bytes(e.seed, b))
	return int(r), ok
}

// rank is Rank for a string, the form Count's pieces come in.
func (e *Encoding) rank(p string) (uint32, bool) {
	return lookup(e, p, maphash.String(e.seed, p))
}

// lookup finds the rank of the token key, whose hash is h.
func lookup[T string | []byte](e *Encoding, key T, h uint64) (uint32, bool) {
	tag := hashTag(h)
	for i := h & e.mask; ; i = (i + 1) & e.mask {
		s := e.table[i]
		if s == 0 {
			return 0, false
		}
		if s&^rankMask == tag {
			if r := s&rankMask - 1; string(e.blob[e.offs[r]:e.offs[r+1]]) == string(key) {
				return r, true
			}
		}
	}
}

// Count returns the number of tokens tiktoken's EncodeOrdinary gives s with
// cl100k_base's pre-tokenizer: special tokens such as <|endoftext|> are
// plain text. Invalid UTF-8 is read as tiktoken-go reads it, each byte that
// does not start a valid sequence standing for U+FFFD.
func (e *Encoding) Count(s string) int {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	n := 0
	for i := 0; i < len(s); {
		j := nextPiece(s, i)
		n += e.countPiece(s[i:j])
		i = j
	}
	return n
}

// countPiece counts the tokens of one pre-token.
func (e *Encoding) countPiece(p string) int {
	if len(p) == 1 {
		return 1
	}
	if _, ok := e.rank(p); ok {
		return 1
	}
	if len(p) < stackParts {
		var buf [stackParts]part
		return e.merge(p, buf[:len(p)+1])
	}
	h := bigMerges.Get().(*heapMerge)
	n := h.count(e, p)
	bigMerges.Put(h)
	return n
}

// part is where a part of a piece starts, and the rank of the token that
// merging it with the next part would make (noRank if none).
type part struct{ start, rank uint32 }

const noRank = math.MaxUint32

// stackParts bounds the pieces merged by merge in a buffer on the stack;
// longer ones, rare outside long runs of one class, go to a heapMerge
// from bigMerges, whose time grows as n log n where merge's grows as n².
const stackParts = 128

var bigMerges = sync.Pool{New: func() any { return new(heapMerge) }}

// merge is tiktoken's byte-pair merge: it merges the adjacent pair of
// lowest rank, the leftmost among equals, until no pair is a token, and
// returns the number of parts left. parts has len(p)+1 elements.
func (e *Encoding) merge(p string, parts []part) int {
	for i := range parts {
		parts[i] = part{uint32(i), noRank}
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = e.pairRank(p, parts, i, 0)
	}
	for len(parts) > 1 {
		lo, at := uint32(noRank), -1
		for i, pt := range parts[:len(parts)-1] {
			if pt.rank < lo {
				lo, at = pt.rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = e.pairRank(p, parts, at, 1)
		if at > 0 {
			parts[at-1].rank = e.pairRank(p, parts, at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}

// pairRank is the rank of the bytes from part i to part i+skip+2, or noRank.
func (e *Encoding) pairRank(p string, parts []part, i, skip int) uint32 {
	if i+skip+2 < len(parts) {
		if r, ok := e.rank(p[parts[i].start:parts[i+skip+2].start]); ok {
			return r
		}
	}
	return noRank
}

// heapMerge is merge for long pieces: the same merges in the same order
// (the pair of lowest rank, the leftmost among equals), found with a heap
// of pairs instead of a scan of all parts per merge. Parts are a list
// linked through next and prev, each named by the byte it starts at; a
// pair in the heap that a merge has since changed is dropped when it comes
// up, known by the end of its right part no longer being where it was.
type heapMerge struct {
	next, prev []uint32 // by a part's start: the next and previous part's
	alive      []bool
	heap       []pair
}

// pair is a mergeable pair in the heap: its token's rank and its left
// part's start, as one key ordering by rank and then position, and where
// its right part ends.
type pair struct {
	key uint64 // rank<<32 | left
	end uint32
}

// none is no part: past either end.
const none = math.MaxUint32

func (h *heapMerge) count(e *Encoding, p string) int {
	n := len(p)
	if cap(h.next) < n {
		h.next, h.prev, h.alive = make([]uint32, n), make([]uint32, n), make([]bool, n)
	}
	next, prev, alive := h.next[:n], h.prev[:n], h.alive[:n]
	h.heap = h.heap[:0]
	for i := range n {
		next[i], prev[i], alive[i] = uint32(i+1), uint32(i-1), true
	}
	next[n-1], prev[0] = none, none
	// end is where the part at i ends.
	end := func(i uint32) uint32 {
		if next[i] == none {
			return uint32(n)
		}
		return next[i]
	}
	push := func(left uint32) {
		if left == none || next[left] == none {
			return
		}
		stop := end(next[left])
		if r, ok := e.rank(p[left:stop]); ok {
			h.push(pair{uint64(r)<<32 | uint64(left), stop})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(uint32(i))
	}
	parts := n
	for len(h.heap) > 0 {
		top := h.pop()
		left := uint32(top.key)
		if !alive[left] || next[left] == none || end(next[left]) != top.end {
			continue // changed since it was pushed
		}
		right := next[left]
		alive[right] = false
		next[left] = next[right]
		if next[right] != none {
			prev[next[right]] = left
		}
		parts--
		push(prev[left])
		push(left)
	}
	return parts
}

func (h *heapMerge) push(x pair) {
	h.heap = append(h.heap, x)
	i := len(h.heap) - 1
	for i > 0 {
		up := (i - 1) / 2
		if h.heap[up].key <= x.key {
			break
		}
		h.heap[i] = h.heap[up]
		i = up
	}
	h.heap[i] = x
}

func (h *heapMerge) pop() pair {
	top := h.heap[0]
	last := h.heap[len(h.heap)-1]
	h.heap = h.heap[:len(h.heap)-1]
	if len(h.heap) == 0 {
		return top
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= len(h.heap) {
			break
		}
		if c+1 < len(h.heap) && h.heap[c+1].key < h.heap[c].key {
			c++
		}
		if last.key <= h.heap[c].key {
			break
		}
		h.heap[i] = h.heap[c]
		i = c
	}
	h.heap[i] = last
	return top
}
