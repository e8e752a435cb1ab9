package memory

import (
	"database/sql"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"prom.codes/memory-mcp/memory/index"
)

// hitCardsBytes bounds the cards a store keeps: two halves of this much
// between them, outside the Go heap where the system has mappings, so
// that they cost their size in resident memory and nothing to the
// collector. One to two halves' worth of cards are kept at a time, some
// 1,100 to 2,300 cards of a 768-byte preview, twice as many of records
// shorter than that: over 3,000 searches at 5,000 records, 84 % of hits
// had a card (38 % with 1 MiB on the heap).
const hitCardsBytes = 2 << 20

// hitCards keeps, by bucket and rowid, what searches read of the records
// they found lately (their cards), so that a search finding a record
// found before reads no row for it. Reading ten hits' rows cost a search
// as much as ranking them.
//
// A card is never older than its bucket's index: the index applies every
// change to a record of the bucket, from whichever process, before each
// search, and applying a change drops the record's card (see
// bucketIndex.cards, set before a card of the bucket is kept). A card
// read before a drop is not kept, as it may be the row as it was before
// the change.
//
// Cards are written one after another into one half until it is full;
// then the other half is emptied, its cards forgotten, and written into.
// The older half of the cards goes at once, without keeping an order of
// use up on every search.
type hitCards struct {
	mu     sync.Mutex
	gen    uint64 // drops so far
	slots  map[cardKey]cardSlot
	halves [2]cardHalf
	cur    uint8 // the half cards are written to
	closed bool  // released: nothing is kept any more
}

// cardHalf is half of the cards' room.
type cardHalf struct {
	buf    []byte    // hitCardsBytes/2, made on first use
	mapped bool      // buf is a mapping of its own, to unmap
	used   int       // bytes of buf written
	keys   []cardKey // of the cards written here, some since dropped or written again
}

// cardSlot is where a card is: its half, offset and length.
type cardSlot struct {
	half   uint8
	off, n uint32
}

// cardKey names a record's card: a rowid may be another record in
// another bucket, whose index has not yet applied the change.
type cardKey struct {
	bucket uint64 // bucketIndex.id
	rowid  int64
}

// bucketIDs numbers buckets for cardKey, uniquely within the process:
// cards are never found under another bucket than the one that kept them.
var bucketIDs atomic.Uint64

// card is what a search reads of a record to show it as a hit.
type card struct {
	id, typ, key, desc string
	body               string // a kept card's: its first previewKeep bytes
	bodyLen            int64  // in bytes, of the whole body
	scope              int
	expires            sql.NullInt64
}

// cardHeader is the length of a kept card's fixed part: the whole body's
// length, whether it expires and when, the scope, and the lengths of its
// five strings, which follow it.
const cardHeader = 8 + 1 + 8 + 4 + 5*4

func (c *card) size() int {
	return cardHeader + len(c.id) + len(c.typ) + len(c.key) + len(c.desc) + len(c.body)
}

// put writes c into b, c.size() bytes.
func (c *card) put(b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(c.bodyLen))
	b[8] = 0
	if c.expires.Valid {
		b[8] = 1
	}
	binary.LittleEndian.PutUint64(b[9:], uint64(c.expires.Int64))
	binary.LittleEndian.PutUint32(b[17:], uint32(int32(c.scope)))
	at := cardHeader
	for i, s := range [5]string{c.id, c.typ, c.key, c.desc, c.body} {
		binary.LittleEndian.PutUint32(b[21+4*i:], uint32(len(s)))
		at += copy(b[at:], s)
	}
}

// readCard returns the card written at b, its strings copied out: the
// room they were read from is written over when its half is emptied.
func readCard(b []byte) *card {
	c := &card{bodyLen: int64(binary.LittleEndian.Uint64(b)), scope: int(int32(binary.LittleEndian.Uint32(b[17:])))}
	c.expires = sql.NullInt64{Int64: int64(binary.LittleEndian.Uint64(b[9:])), Valid: b[8] == 1}
	text := string(b[cardHeader:])
	var s [5]string
	for i := range s {
		n := int(binary.LittleEndian.Uint32(b[21+4*i:]))
		s[i], text = text[:n], text[n:]
	}
	c.id, c.typ, c.key, c.desc, c.body = s[0], s[1], s[2], s[3], s[4]
	return c
}

// generation is the number of drops so far; a card read after it is
// taken may be kept if no drop comes between (see keep).
func (h *hitCards) generation() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// get returns the card of the record at rowid in b, if kept.
func (h *hitCards) get(b *bucketIndex, rowid int64) (*card, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.slots[cardKey{b.id, rowid}]
	if !ok {
		return nil, false
	}
	return readCard(h.halves[s.half].buf[s.off : s.off+s.n]), true
}

// keep keeps c as the card of the record at rowid in b, read after
// generation returned gen, unless a change was applied since.
func (h *hitCards) keep(b *bucketIndex, rowid int64, c *card, gen uint64) {
	n := c.size()
	if n > hitCardsBytes/64 {
		return // no card is that big; one that were would crowd out the rest
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen || h.closed {
		return
	}
	half := &h.halves[h.cur]
	if half.buf != nil && half.used+n > len(half.buf) {
		h.cur ^= 1
		half = &h.halves[h.cur]
		h.empty(h.cur)
	}
	if half.buf == nil {
		if half.buf = index.Mapped(hitCardsBytes / 2); half.buf != nil {
			half.mapped = true
		} else {
			half.buf = make([]byte, hitCardsBytes/2)
		}
	}
	if h.slots == nil {
		h.slots = map[cardKey]cardSlot{}
	}
	k := cardKey{b.id, rowid}
	c.put(half.buf[half.used : half.used+n])
	h.slots[k] = cardSlot{half: h.cur, off: uint32(half.used), n: uint32(n)}
	half.keys = append(half.keys, k)
	half.used += n
}

// empty forgets the cards of half i, to write it again.
func (h *hitCards) empty(i uint8) {
	half := &h.halves[i]
	for _, k := range half.keys {
		// A card written again since into the other half stays.
		if s, ok := h.slots[k]; ok && s.half == i {
			delete(h.slots, k)
		}
	}
	half.keys, half.used = half.keys[:0], 0
}

// drop forgets the card of the record at rowid in b, which has changed.
func (h *hitCards) drop(b *bucketIndex, rowid int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	delete(h.slots, cardKey{b.id, rowid})
}

// bytes is the room the cards kept take, those dropped or written again
// since included.
func (h *hitCards) bytes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.halves[0].used + h.halves[1].used
}

// release gives back the cards' room; nothing is kept after it.
func (h *hitCards) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.slots = nil
	for i := range h.halves {
		half := &h.halves[i]
		if half.mapped {
			index.Unmap(half.buf)
		}
		h.halves[i] = cardHalf{}
	}
}
