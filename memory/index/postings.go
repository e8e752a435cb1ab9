package index

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sort"
)

// A term's postings are kept as bytes, in document order: each is the
// document's distance from the one before (the first's from 0) as a
// uvarint, then a header byte whose low four bits mark the fields holding
// the term and whose high four bits are the count in the first of them
// (0: too many for four bits, a byte follows), then a byte for the count
// in each further field. Most postings take two or three bytes where a
// fixed-width one took eight.

// blockLen is how many postings a skip entry covers: a long list is
// entered at the block before the sought document and read on from there.
const blockLen = 16

// skip marks the start of a block of postings: the document of the
// posting before it, which the first one's distance counts from, and its
// offset in the list's bytes.
type skip struct {
	base uint32
	off  uint32
}

// appendPosting appends ps, which follows a posting of document prev, to
// buf.
func appendPosting(buf []byte, prev uint32, ps posting) []byte {
	buf = binary.AppendUvarint(buf, uint64(ps.doc-prev))
	var mask byte
	first := -1
	for f := range NumFields {
		if ps.tf[f] > 0 {
			mask |= 1 << f
			if first < 0 {
				first = int(f)
			}
		}
	}
	if first < 0 {
		return append(buf, 0)
	}
	nib := ps.tf[first]
	if nib > 15 {
		nib = 0
	}
	buf = append(buf, mask|nib<<4)
	if nib == 0 {
		buf = append(buf, ps.tf[first])
	}
	for f := first + 1; f < int(NumFields); f++ {
		if ps.tf[f] > 0 {
			buf = append(buf, ps.tf[f])
		}
	}
	return buf
}

// tails[h] is how many bytes a posting takes after its distance, given
// its header byte h.
var tails = func() (t [256]uint8) {
	for h := range 256 {
		mask := h & 0xf
		n := 1 + max(bits.OnesCount(uint(mask))-1, 0)
		if mask != 0 && h>>4 == 0 {
			n++
		}
		t[h] = uint8(n)
	}
	return t
}()

// sole[mask] is the one field mask marks, -1 if it marks none or several.
var sole = [16]int8{-1, 0, 1, -1, 2, -1, -1, -1, 3, -1, -1, -1, -1, -1, -1, -1}

// readTF decodes the counts of a posting from its header byte on.
func readTF(b []byte) (tf [NumFields]uint8) {
	h := b[0]
	mask := h & 0xf
	n := 1
	first := true
	for f := range NumFields {
		if mask&(1<<f) == 0 {
			continue
		}
		if first {
			first = false
			if nib := h >> 4; nib != 0 {
				tf[f] = nib
				continue
			}
		}
		tf[f] = b[n]
		n++
	}
	return tf
}

// cursor walks a term's postings.
type cursor struct {
	buf   []byte
	skips []skip
	off   int    // where the posting after the current one starts
	hdr   int    // where the current posting's header byte is
	blk   int    // a block at or before the current posting's
	cur   uint32 // the current posting's document; MaxUint32 at the end
	n     int    // how many postings the list holds, dead ones too
	idf   float64
	ub    float64
}

// cursor returns a cursor at the first posting of term t.
func (p *Partition) cursor(t uint32) *cursor {
	c := new(cursor)
	p.start(c, t)
	return c
}

// start sets c at the first posting of term t.
func (p *Partition) start(c *cursor, t uint32) {
	*c = cursor{buf: p.list(t), n: int(p.terms[t].count)}
	if c.n > blockLen {
		c.skips = p.skips[t]
	}
	c.next()
}

func (c *cursor) doc() uint32 { return c.cur }

// posting decodes the current posting.
func (c *cursor) posting() posting {
	ps := posting{doc: c.cur}
	h := c.buf[c.hdr]
	if f := sole[h&0xf]; f >= 0 && h>>4 != 0 {
		ps.tf[f] = h >> 4
		return ps
	}
	ps.tf = readTF(c.buf[c.hdr:])
	return ps
}

// next moves to the next posting.
func (c *cursor) next() {
	b, off := c.buf, c.off
	if off >= len(b) {
		c.cur = math.MaxUint32
		return
	}
	if d := b[off]; d < 0x80 {
		c.cur += uint32(d)
		off++
	} else if off+1 < len(b) && b[off+1] < 0x80 {
		c.cur += uint32(d&0x7f) | uint32(b[off+1])<<7
		off += 2
	} else {
		v, n := binary.Uvarint(b[off:])
		c.cur += uint32(v)
		off += n
	}
	c.hdr = off
	c.off = off + int(tails[b[off]])
}

// seek moves to the first posting at or after doc.
func (c *cursor) seek(d uint32) {
	if c.cur >= d {
		return
	}
	if sk := c.skips; len(sk) > 0 {
		// Gallop to the last block whose postings all follow a document
		// before d: it holds d, if any block does.
		j, step := c.blk, 1
		for j+step < len(sk) && sk[j+step].base < d {
			j += step
			step *= 2
		}
		hi := min(j+step, len(sk))
		j += sort.Search(hi-j-1, func(i int) bool { return sk[j+1+i].base >= d })
		c.blk = j
		if s := sk[j]; int(s.off) > c.off {
			c.off = int(s.off)
			c.cur = s.base
		}
	}
	for c.cur < d {
		c.next()
	}
}
