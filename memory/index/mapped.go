package index

// A partition's two big arrays, its documents' term ids and its postings,
// are kept outside the Go heap once they reach bigMin: the collector lets
// the heap grow to about twice what it holds live before collecting again,
// so bytes on the heap cost about twice their size in resident memory, and
// these arrays, bytes with no pointers in them, are most of an index. Only
// the partition touches them, under its lock; the mappings behind them are
// unmapped when they are replaced and when the partition is collected.

// bigMin is the room from which an array is a mapping of its own.
const bigMin = 64 << 10

// mappings are the mappings behind a partition's arrays, nil for arrays on
// the Go heap.
type mappings struct{ toks, post []byte }

func (m *mappings) release() {
	unmapBytes(m.toks)
	unmapBytes(m.post)
	m.toks, m.post = nil, nil
}

// allocBytes returns an array of length l with room for at least c bytes,
// a mapping of its own (m) when c reaches bigMin and the system has them.
func allocBytes(l, c int) (b, m []byte) {
	if c >= bigMin {
		if m = mapBytes(c); m != nil {
			return m[:l], m
		}
	}
	return make([]byte, l, c), nil
}

// regrow returns b with room for c bytes, copied into a new array; *m,
// the mapping behind b if any, is unmapped and replaced by the new one's.
func regrow(b []byte, c int, m *[]byte) []byte {
	nb, nm := allocBytes(len(b), c)
	copy(nb, b)
	unmapBytes(*m)
	*m = nm
	return nb
}

// withRoom returns b with room for n more bytes: b itself when it has them,
// else a copy with at least a quarter more room than b had.
func withRoom(b []byte, n int, m *[]byte) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	return regrow(b, max(len(b)+n, cap(b)+cap(b)/4+1024), m)
}

// Mapped returns n bytes outside the Go heap, whole pages of a mapping of
// their own, or nil where the system has none; Unmap releases them. A
// cache of bytes kept there costs its size in resident memory, where on
// the heap it would cost about twice that (see above).
func Mapped(n int) []byte { return mapBytes(n) }

// Unmap releases m, as Mapped returned it; nil is none.
func Unmap(m []byte) { unmapBytes(m) }
