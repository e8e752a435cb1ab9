package memory

import (
	"database/sql"
	"sync"
)

// hitCardsBytes bounds the cards a process keeps, in bytes of text and
// bookkeeping, whatever the number of buckets: about a thousand records'
// cards.
const hitCardsBytes = 1 << 20

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
type hitCards struct {
	mu    sync.Mutex
	gen   uint64 // drops so far
	cards map[cardKey]*card
	size  int // bytes the cards take, about
}

// cardKey names a record's card: a rowid may be another record in
// another bucket, whose index has not yet applied the change.
type cardKey struct {
	b     *bucketIndex
	rowid int64
}

// card is what a search reads of a record to show it as a hit.
type card struct {
	id, typ, key, desc string
	body               string // its first previewRead characters
	bodyLen            int64  // in bytes, of the whole body
	scope              int
	expires            sql.NullInt64
}

// cardOverhead is about what a card takes besides its text: the struct,
// its place in the map, the strings' headers.
const cardOverhead = 160

func (c *card) size() int {
	return cardOverhead + len(c.id) + len(c.typ) + len(c.key) + len(c.desc) + len(c.body)
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
	c, ok := h.cards[cardKey{b, rowid}]
	return c, ok
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
	if h.gen != gen {
		return
	}
	if h.cards == nil {
		h.cards = map[cardKey]*card{}
	}
	k := cardKey{b, rowid}
	if old, ok := h.cards[k]; ok {
		h.size -= old.size()
	}
	// Make room by dropping cards as the map's order gives them: no
	// order of use to keep up on every search.
	for o, oc := range h.cards {
		if h.size+n <= hitCardsBytes {
			break
		}
		if o != k {
			h.size -= oc.size()
			delete(h.cards, o)
		}
	}
	h.cards[k] = c
	h.size += n
}

// drop forgets the card of the record at rowid in b, which has changed.
func (h *hitCards) drop(b *bucketIndex, rowid int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	k := cardKey{b, rowid}
	if c, ok := h.cards[k]; ok {
		h.size -= c.size()
		delete(h.cards, k)
	}
}
