package index

import "hash/maphash"

// dict gives terms their ids. A map of strings cost some fifty bytes a
// term beside the term itself, and a partition holds about three terms
// for each document; this keeps the terms' bytes end to end and finds
// them through an open-addressing table of ids, some twenty.
type dict struct {
	text  []byte   // the terms, in order of id, end to end
	ends  []uint32 // by id: where the term ends in text
	slots []uint32 // id+1 per slot, 0 for none; a power of two long
	seed  maphash.Seed
}

func newDict() dict { return dict{seed: maphash.MakeSeed()} }

func (d *dict) at(id uint32) string { return string(d.bytes(id)) }

// bytes is term id's text, not to be changed.
func (d *dict) bytes(id uint32) []byte {
	start := uint32(0)
	if id > 0 {
		start = d.ends[id-1]
	}
	return d.text[start:d.ends[id]]
}

// lookup returns t's id.
func (d *dict) lookup(t string) (uint32, bool) {
	if len(d.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(d.slots) - 1)
	for i := maphash.String(d.seed, t) & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s == 0 {
			return 0, false
		}
		if d.equal(s-1, t) {
			return s - 1, true
		}
	}
}

func (d *dict) equal(id uint32, t string) bool {
	start := uint32(0)
	if id > 0 {
		start = d.ends[id-1]
	}
	return string(d.text[start:d.ends[id]]) == t
}

// add gives t, which d lacks, the next id and returns it.
func (d *dict) add(t string) uint32 {
	id := uint32(len(d.ends))
	d.text = append(d.text, t...)
	d.ends = append(d.ends, uint32(len(d.text)))
	if 4*(len(d.ends)) > 3*len(d.slots) {
		d.grow()
	} else {
		d.place(t, id)
	}
	return id
}

func (d *dict) place(t string, id uint32) {
	mask := uint64(len(d.slots) - 1)
	i := maphash.String(d.seed, t) & mask
	for d.slots[i] != 0 {
		i = (i + 1) & mask
	}
	d.slots[i] = id + 1
}

// grow doubles the table and places every term anew.
func (d *dict) grow() {
	d.slots = make([]uint32, max(16, 2*len(d.slots)))
	for id := range d.ends {
		d.place(d.at(uint32(id)), uint32(id))
	}
}
