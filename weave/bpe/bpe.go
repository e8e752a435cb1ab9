// Package bpe counts tokens of OpenAI's cl100k_base encoding, exactly as
// tiktoken encodes ordinary text, without regular expressions and without
// tables the garbage collector has to scan or a load has to build.
//
// The ranks ship in the binary as one table (cl100k_base.bpe, written by
// this package's tests from tiktoken-go-loader's cl100k_base.tiktoken), so
// nothing is ever downloaded and nothing is parsed at run time: the bytes
// of every token end to end, the offset of each token in them by rank, and
// an open-addressing hash table from a token's bytes to its rank, all
// little-endian and read in place from the binary's read-only data. Loading
// costs a few checks of its header; the 100,256 tokens take about 2.1 MB
// of the binary, shared by every process running it, and no heap.
//
// It imports only the standard library.
package bpe

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unicode/utf8"
)

// Encoding holds the ranks of a byte-pair encoding. It is immutable once
// loaded and safe for concurrent use.
type Encoding struct {
	raw   string // the whole table, as written by marshal
	blob  string // every token's bytes, in rank order
	offs  string // n+1 uint32s: token r is blob[off(r):off(r+1)]
	table string // slots uint32s: 0 when empty, else a hash tag above rank+1
	mask  uint64 // slots-1
}

// Slots keep rank+1 in their low rankBits bits and the top bits of the
// token's hash above them, so most probes that miss are told apart without
// comparing bytes.
const (
	rankBits = 17
	rankMask = 1<<rankBits - 1
)

// A table is a header of four uint32s, magic then the number of tokens n,
// of slots and of bytes of tokens, then the n+1 offsets, the slots and the
// bytes. Every uint32 is little-endian.
const (
	magic      = "bpe1"
	headerSize = 16
)

//go:embed cl100k_base.bpe
var cl100kTable string

// CL100K returns the cl100k_base ranks compiled into the binary. Its error
// says what in the embedded table is malformed, which only a damaged build
// could make it.
func CL100K() (*Encoding, error) {
	e, err := unmarshal(cl100kTable)
	if err != nil {
		return nil, fmt.Errorf("load cl100k_base.bpe: %w", err)
	}
	return e, nil
}

// unmarshal checks the header of a table and the sizes it gives, and
// returns the encoding that reads it in place.
func unmarshal(raw string) (*Encoding, error) {
	if len(raw) < headerSize || raw[:4] != magic {
		return nil, errors.New("not a table of ranks")
	}
	n, slots, size := uint64(le32(raw, 1)), uint64(le32(raw, 2)), uint64(le32(raw, 3))
	if n == 0 || n >= rankMask || slots < 2*n || slots&(slots-1) != 0 {
		return nil, fmt.Errorf("%d tokens in %d slots: out of range", n, slots)
	}
	offsEnd := headerSize + 4*(n+1)
	tableEnd := offsEnd + 4*slots
	if uint64(len(raw)) != tableEnd+size {
		return nil, fmt.Errorf("%d bytes, want %d", len(raw), tableEnd+size)
	}
	e := &Encoding{
		raw:   raw,
		offs:  raw[headerSize:offsEnd],
		table: raw[offsEnd:tableEnd],
		blob:  raw[tableEnd:],
		mask:  slots - 1,
	}
	if e.off(0) != 0 || uint64(e.off(int(n))) != size {
		return nil, errors.New("offsets do not span the tokens")
	}
	return e, nil
}

// marshal builds the table of the tokens given by rank: tokens[r] has
// rank r. It is deterministic: the same tokens make the same bytes.
func marshal(tokens [][]byte) (string, error) {
	n, size := len(tokens), 0
	for _, t := range tokens {
		size += len(t)
	}
	if n == 0 || n >= rankMask || size > math.MaxUint32 {
		return "", fmt.Errorf("%d tokens of %d bytes: out of range", n, size)
	}
	slots := 1 << bits.Len(uint(2*n)) // at most half full, so probes stay short
	b := make([]byte, 0, headerSize+4*(n+1)+4*slots+size)
	b = append(b, magic...)
	b = appendLE32(b, uint32(n), uint32(slots), uint32(size))
	off := 0
	b = appendLE32(b, 0)
	for _, t := range tokens {
		off += len(t)
		b = appendLE32(b, uint32(off))
	}
	table := make([]uint32, slots)
	mask := uint64(slots - 1)
	for r, t := range tokens {
		h := hashOf(t)
		tag := hashTag(h)
		for i := h & mask; ; i = (i + 1) & mask {
			s := table[i]
			if s == 0 {
				table[i] = tag | uint32(r+1)
				break
			}
			if s&^rankMask == tag && bytes.Equal(tokens[s&rankMask-1], t) {
				return "", fmt.Errorf("line %d: token repeated", r+1)
			}
		}
	}
	b = appendLE32(b, table...)
	for _, t := range tokens {
		b = append(b, t...)
	}
	return string(b), nil
}

func appendLE32(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return b
}

// le32 is the i-th little-endian uint32 of s.
func le32(s string, i int) uint32 {
	s = s[4*i : 4*i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// Parse reads ranks in tiktoken's format: one token per line, its bytes in
// standard base64, a space, and its rank. Ranks must run 0, 1, 2... in line
// order, as they do in every published encoding.
func Parse(data []byte) (*Encoding, error) {
	var tokens [][]byte
	for n, line := range bytes.Split(data, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		tok, rank, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			return nil, fmt.Errorf("line %d: no space", n+1)
		}
		if r, ok := atoi(rank); !ok || r != len(tokens) {
			return nil, fmt.Errorf("line %d: rank %q, want %d", n+1, rank, len(tokens))
		}
		if len(tok)%4 != 0 {
			return nil, fmt.Errorf("line %d: token %q is not padded base64", n+1, tok)
		}
		t, err := base64.StdEncoding.AppendDecode(nil, tok)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		tokens = append(tokens, t)
	}
	raw, err := marshal(tokens)
	if err != nil {
		return nil, err
	}
	return unmarshal(raw)
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

// Len returns the number of tokens.
func (e *Encoding) Len() int { return len(e.offs)/4 - 1 }

// off is where the token of rank r starts in blob.
func (e *Encoding) off(r int) uint32 { return le32(e.offs, r) }

// token returns the bytes of the token of rank r.
func (e *Encoding) token(r int) string { return e.blob[e.off(r):e.off(r+1)] }

// hashOf is the hash of a token's bytes the table is built with; it must
// never change without the table being written again (the tests check
// the embedded table against one built afresh). A table built from fixed
// tokens cannot be flooded: whatever is looked up, a probe ends at the
// first empty slot, and the longest run of full ones is a property of the
// table alone.
func hashOf[T string | []byte](s T) uint64 {
	h := uint64(len(s)) * 0x9e3779b97f4a7c15
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = bits.RotateLeft64((h^w)*0xbf58476d1ce4e5b9, 31)
		s = s[8:]
	}
	var w uint64
	for i := len(s) - 1; i >= 0; i-- {
		w = w<<8 | uint64(s[i])
	}
	h ^= w
	// splitmix64's finalizer: every bit of the input reaches the low bits
	// that pick the slot and the high bits of the tag.
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	return h ^ h>>31
}

// hashTag is the part of a token's hash its slot keeps above its rank.
func hashTag(h uint64) uint32 { return uint32(h>>(64-(32-rankBits))) << rankBits }

// Rank returns the rank of the token whose bytes are b, if there is one.
func (e *Encoding) Rank(b []byte) (int, bool) {
	r, ok := lookup(e, b)
	return int(r), ok
}

// rank is Rank for a string, the form Count's pieces come in.
func (e *Encoding) rank(p string) (uint32, bool) {
	return lookup(e, p)
}

// lookup finds the rank of the token key.
func lookup[T string | []byte](e *Encoding, key T) (uint32, bool) {
	h := hashOf(key)
	tag := hashTag(h)
	for i := h & e.mask; ; i = (i + 1) & e.mask {
		s := le32(e.table, int(i))
		if s == 0 {
			return 0, false
		}
		if s&^rankMask == tag {
			if r := s&rankMask - 1; e.token(int(r)) == string(key) {
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
