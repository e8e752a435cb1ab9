package memory

import (
	"database/sql"
	"sync"
	"sync/atomic"
)

// hitCardsMax bounds the cards a store keeps; when it is reached they are
// all forgotten and kept anew.
const hitCardsMax = 2048

// hitCards keeps, by bucket and rowid, what searches read of the records
// they found lately (their cards), so that a search finding a record
// found before reads no row for it.
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

// card is what a search reads of a record to show it as a hit. A kept
// card is never changed.
type card struct {
	id, typ, key, desc string
	body               string // a kept card's: its first previewKeep bytes
	bodyLen            int64  // in bytes, of the whole body
	scope              int
	expires            sql.NullInt64
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
	c, ok := h.cards[cardKey{b.id, rowid}]
	return c, ok
}

// keep keeps c as the card of the record at rowid in b, read after
// generation returned gen, unless a change was applied since.
func (h *hitCards) keep(b *bucketIndex, rowid int64, c *card, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return
	}
	if h.cards == nil || len(h.cards) >= hitCardsMax {
		h.cards = map[cardKey]*card{}
	}
	h.cards[cardKey{b.id, rowid}] = c
}

// drop forgets the card of the record at rowid in b, which has changed.
func (h *hitCards) drop(b *bucketIndex, rowid int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	delete(h.cards, cardKey{b.id, rowid})
}
