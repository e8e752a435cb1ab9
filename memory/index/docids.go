package index

// docIDs finds documents by id. A map from ids to document numbers cost
// some thirty bytes a document; this open-addressing table keeps only the
// numbers, four bytes a slot, and compares ids in the documents
// themselves. A deleted document keeps its slot, which lookups skip,
// until the table grows or the partition compacts.
type docIDs struct {
	slots []uint32 // document number+1 per slot, 0 for none; a power of two long
	used  int      // slots holding a document, deleted ones too
	shift uint8    // 64 - log2(len(slots))
}

func (t *docIDs) home(id int64) uint64 {
	return uint64(id) * 0x9E3779B97F4A7C15 >> t.shift
}

// find returns the number of the live document with id.
func (t *docIDs) find(docs []doc, id int64) (uint32, bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(id); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if d := &docs[s-1]; d.id == id && !d.dead {
			return s - 1, true
		}
	}
}

// add enters document n of docs, whose id no live document has.
func (t *docIDs) add(docs []doc, n uint32) {
	if 4*(t.used+1) > 3*len(t.slots) {
		t.rebuild(docs, t.used+1)
	}
	t.place(docs[n].id, n)
	t.used++
}

func (t *docIDs) place(id int64, n uint32) {
	mask := uint64(len(t.slots) - 1)
	i := t.home(id)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = n + 1
}

// rebuild makes room for at least n live documents and enters the live
// documents of docs that the table holds, leaving out the deleted.
func (t *docIDs) rebuild(docs []doc, n int) {
	old := t.slots
	size, shift := 16, uint8(60)
	for 3*size < 4*n || size < 2*n {
		size, shift = 2*size, shift-1
	}
	t.slots, t.shift, t.used = make([]uint32, size), shift, 0
	for _, s := range old {
		if s != 0 && !docs[s-1].dead {
			t.place(docs[s-1].id, s-1)
			t.used++
		}
	}
}
