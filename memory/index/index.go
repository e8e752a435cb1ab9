// Package index is the retrieval engine behind search: an inverted index of
// records' text, kept in memory per partition, that ranks record ids for a
// query with BM25F, MaxScore pruning and a phrase bonus. It knows nothing
// of SQL, scopes or files: documents come in as ids and field texts, ranked
// ids go out. It imports the standard library only.
package index

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"
)

// Field is one searchable part of a document.
type Field uint8

// The fields of a document.
const (
	Key Field = iota
	Description
	Body
	Tags
	NumFields
)

var fieldNames = [NumFields]string{"key", "description", "body", "tags"}

func (f Field) String() string { return fieldNames[f] }

// Params tune the ranking.
type Params struct {
	// Weights of the fields: a word in a key says more about a record than
	// one deep in its body.
	Weights [NumFields]float64
	// B is BM25's length normalisation per field, K1 its saturation.
	B  [NumFields]float64
	K1 float64
	// Phrase is the bonus, as a multiple of the best score among the
	// candidates, for a document that holds the query as written, in one
	// field; one holding a run of a share s of it gets s² of it.
	Phrase float64
	// Half is the raw score that maps to 0.5 when scores are squeezed
	// into 0..1.
	Half float64
	// Coord scales a document's score by the share of the query's terms
	// it holds, raised to this power; 0 leaves scores alone. Without it a
	// record holding two rare words of the query in its key outranks the
	// one holding all three in its body.
	Coord float64

	// When is the bonus, as a multiple of the best score, for a record
	// among the top k whose text holds a time expression, when the query
	// asks "when".
	When float64

	// Context is the share of the score of each of the top k that the
	// documents of its partition whose ids are one below and one above
	// its own are raised to, when they score less and hold a query word.
	// Ids are given in the order records are written, so these are the
	// turns around a matching turn of a conversation, often about the
	// same thing, and answering a question together. 0 leaves them alone.
	Context float64
}

// DefaultParams are the parameters search uses. Light length
// normalisation and early saturation (b 0.3, k1 0.6) found known records
// by a few of their words more often than BM25's usual 0.75 and 1.2, and
// lost nothing on the labelled sets (go run ./cmd/memory-bench -eval).
var DefaultParams = Params{
	Weights: [NumFields]float64{3, 2, 1, 2},
	B:       [NumFields]float64{0.3, 0.3, 0.3, 0.3},
	K1:      0.6,
	Phrase:  1.0,
	Half:    5,
	Coord:   1,
	When:    0.3,
	Context: 0.7,
}

// Doc is a document to index.
type Doc struct {
	ID     int64
	Fields [NumFields]string
	// Tag is the caller's, handed back with the document to Query.Accept:
	// where the caller keeps what it judges documents by, say, so that it
	// need not look the id up.
	Tag uint32
	// Created, when set, is when the document was written; its year and
	// month are indexed with its tags (see dateTerms).
	Created time.Time
}

type posting struct {
	doc uint32
	tf  [NumFields]uint8
}

// doc is a document's entry. Its term ids, every field's in order, are
// uvarints in the partition's toks, each document's after the one
// before's: one array for all of them, rather than a slice each, saves a
// slice header and an allocation per document and gives the collector no
// pointers to follow.
//
// How many terms each of its fields has is kept apart, in the partition's
// flens: ranking reads those lengths for every posting it scores, and
// nothing else of the document until it would rank.
type doc struct {
	id   int64
	ends [NumFields]uint32 // where each field's terms end in the partition's toks
	tag  uint32
	dead bool
}

// fieldLens is how many terms each field of a document has, at most
// MaxUint16; stop-words are not counted.
type fieldLens [NumFields]uint16

// docStart is where document n's terms begin in p.toks.
func (p *Partition) docStart(n uint32) uint32 {
	if n == 0 {
		return 0
	}
	return p.docs[n-1].ends[NumFields-1]
}

// field appends the term ids of document n's field f to buf.
func (p *Partition) field(n uint32, f Field, buf []uint32) []uint32 {
	from := p.docStart(n)
	if f > 0 {
		from = p.docs[n].ends[f-1]
	}
	b := p.toks[from:p.docs[n].ends[f]]
	for len(b) > 0 {
		v, n := uvarint32(b)
		buf = append(buf, v)
		b = b[n:]
	}
	return buf
}

// uvarint32 decodes a term id, most often one byte long, from b.
func uvarint32(b []byte) (uint32, int) {
	if c := b[0]; c < 0x80 {
		return uint32(c), 1
	}
	v, n := binary.Uvarint(b)
	return uint32(v), n
}

// term is what a partition keeps of a term. Its postings, in document
// order, are post[off:off+n] with room up to off+room; a list that
// outgrows its room moves to the end of post with twice as much, and post
// is packed again once half of it is left behind. One array for every
// list, rather than a slice each, saves a slice header and an allocation
// per term (a partition holds about three terms per document, most of
// them in one document only) and gives the collector nothing to follow.
type term struct {
	off, n, room uint32
	last         uint32             // the document of the last posting
	count        uint32             // how many postings, dead ones too
	df           int32              // live documents holding the term
	maxr         [NumFields]bound16 // the bound per field (see Partition.ref)
}

// list is term t's postings.
func (p *Partition) list(t uint32) []byte {
	tm := &p.terms[t]
	return p.post[tm.off : tm.off+tm.n : tm.off+tm.n]
}

// Partition is the index of one partition of documents. It is safe for
// concurrent use.
type Partition struct {
	mu    sync.RWMutex
	dict  dict
	terms []term            // by term id
	post  []byte            // every term's postings (see term)
	waste int               // bytes of post no list holds
	skips map[uint32][]skip // the blocks of lists longer than one
	docs  []doc
	flens []fieldLens // by document, beside docs
	toks  []byte      // the documents' term ids (see doc)
	byID  docIDs
	live  int
	dead  int
	lens  [NumFields]int64 // summed field lengths of live documents

	// The reference average field lengths of the terms' bounds (see
	// term.maxr): for each term, the most any of its postings gives per
	// field, tf / (1 - b + b·length/ref) with DefaultParams' b, the bound
	// MaxScore prunes with. It stays a bound as documents go; the bounds
	// are rebuilt when the averages drift far from ref.
	ref [NumFields]float64

	stop []bool // by term id: a stop-word, kept only for phrases

	enc  []byte            // where Put encodes a document's terms
	ends [NumFields]uint32 // and where each field's end in enc
	work struct {
		at    map[uint32]int // index in order by term
		order []posting      // a document's terms, in the doc field, and counts
		fl    []uint32
	}
}

// NewPartition returns an empty partition.
func NewPartition() *Partition {
	return &Partition{dict: newDict(), skips: map[uint32][]skip{}}
}

// Len reports how many documents the partition holds.
func (p *Partition) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.live
}

// Put adds d, replacing any document with its id.
func (p *Partition) Put(d Doc) {
	// Every field's terms in one slice, sized for prose's five or more
	// bytes a term: growing a slice per field was most of what a load
	// allocated.
	size := int(NumFields)
	for _, text := range d.Fields {
		size += len(text) / 5
	}
	terms := make([]string, 0, size)
	var fields [NumFields][]string
	for f := range NumFields {
		from := len(terms)
		terms = appendTerms(terms, d.Fields[f], true)
		fields[f] = terms[from:len(terms):len(terms)]
	}
	if !d.Created.IsZero() {
		fields[Tags] = append(fields[Tags], dateTerms(d.Created)...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	nd := doc{id: d.ID, tag: d.Tag}
	var lens fieldLens
	// Encoded aside first: deleting the document's old version may
	// compact the partition's toks.
	toks := p.enc[:0]
	for f := range NumFields {
		for _, t := range fields[f] {
			toks = binary.AppendUvarint(toks, uint64(p.termID(t)))
			if !isStop(t) && lens[f] < math.MaxUint16 {
				lens[f]++
			}
		}
		p.ends[f] = uint32(len(toks))
	}
	p.enc = toks
	p.deleteLocked(d.ID)
	p.addLocked(nd, lens, toks, p.ends)
}

// termID returns t's id, adding it to the dictionary.
func (p *Partition) termID(t string) uint32 {
	id, ok := p.dict.lookup(t)
	if !ok {
		id = p.dict.add(t)
		p.terms = append(p.terms, term{})
		p.stop = append(p.stop, isStop(t))
	}
	return id
}

// addLocked adds document d, whose fields have lens terms and whose terms
// are toks, field f's ending at ends[f].
func (p *Partition) addLocked(d doc, lens fieldLens, toks []byte, ends [NumFields]uint32) {
	n := uint32(len(p.docs))
	base := uint32(len(p.toks))
	p.toks = append(p.toks, toks...)
	for f := range NumFields {
		d.ends[f] = base + ends[f]
	}
	p.docs = append(p.docs, d)
	p.flens = append(p.flens, lens)
	p.byID.add(p.docs, n)
	p.live++
	// The counts are gathered in working memory kept between documents:
	// a map and slices of their own per document were most of what a
	// load allocated.
	w := &p.work
	if w.at == nil {
		w.at = map[uint32]int{}
	}
	clear(w.at)
	w.order = w.order[:0]
	for f := range NumFields {
		w.fl = p.field(n, f, w.fl[:0])
		p.lens[f] += int64(lens[f])
		for _, t := range w.fl {
			if p.stop[t] {
				continue
			}
			i, ok := w.at[t]
			if !ok {
				i = len(w.order)
				w.at[t] = i
				w.order = append(w.order, posting{doc: t})
			}
			if tf := &w.order[i].tf[f]; *tf < math.MaxUint8 {
				*tf++
			}
		}
	}
	for _, o := range w.order {
		t := o.doc // the term, while gathering
		ps := posting{doc: n, tf: o.tf}
		p.appendPosting(t, ps)
		p.terms[t].df++
		p.raise(t, ps)
	}
	p.checkRef()
}

// appendPosting adds ps to the end of term t's postings.
func (p *Partition) appendPosting(t uint32, ps posting) {
	tm := &p.terms[t]
	if c := tm.count; c > 0 && c%blockLen == 0 {
		if c == blockLen {
			p.skips[t] = []skip{{}}
		}
		p.skips[t] = append(p.skips[t], skip{base: tm.last, off: tm.n})
	}
	var enc [2*binary.MaxVarintLen32 + NumFields]byte
	b := appendPosting(enc[:0], tm.last, ps)
	if tm.n+uint32(len(b)) > tm.room {
		p.move(tm, max(2*tm.room, tm.n+uint32(len(b)), 4))
	}
	copy(p.post[tm.off+tm.n:], b)
	tm.n += uint32(len(b))
	tm.last = ps.doc
	tm.count++
}

// move gives tm's list room bytes of room: in place when the list ends
// post, else at the end of post.
func (p *Partition) move(tm *term, room uint32) {
	if p.waste > 1<<16 && p.waste > len(p.post)/2 {
		p.pack(0)
	}
	if tm.off+tm.room == uint32(len(p.post)) {
		p.post = p.grow(int(room - tm.room))
		tm.room = room
		return
	}
	off := uint32(len(p.post))
	p.post = p.grow(int(room))
	copy(p.post[off:], p.post[tm.off:tm.off+tm.n])
	p.waste += int(tm.room)
	tm.off, tm.room = off, room
}

// grow lengthens post by n bytes.
func (p *Partition) grow(n int) []byte {
	return slices.Grow(p.post, n)[:len(p.post)+n]
}

// pack copies every list into a new array, with slack bytes of room
// each, leaving out what none holds.
func (p *Partition) pack(slack uint32) {
	size := 0
	for t := range p.terms {
		size += int(p.terms[t].n + min(slack, p.terms[t].room-p.terms[t].n))
	}
	post := make([]byte, size)
	off := uint32(0)
	for t := range p.terms {
		tm := &p.terms[t]
		copy(post[off:], p.post[tm.off:tm.off+tm.n])
		tm.off, tm.room = off, tm.n+min(slack, tm.room-tm.n)
		off += tm.room
	}
	p.post, p.waste = post, 0
}

// raise lifts term t's bounds to cover ps.
func (p *Partition) raise(t uint32, ps posting) {
	lens := &p.flens[ps.doc]
	for f := range NumFields {
		if ps.tf[f] == 0 {
			continue
		}
		r := up16(float64(ps.tf[f]) / (1 - DefaultParams.B[f] + DefaultParams.B[f]*float64(lens[f])/p.ref[f]))
		if r > p.terms[t].maxr[f] {
			p.terms[t].maxr[f] = r
		}
	}
}

// bound16 is a positive bound kept in 16 bits: the top half of a
// float32, rounded up, so that it stays a bound. Eight bits of mantissa
// loosen a term's bound by under one percent and halve what the bounds
// cost.
type bound16 uint16

func up16(v float64) bound16 {
	b := math.Float32bits(float32(v))
	h := b >> 16
	if b&0xffff != 0 {
		h++
	}
	return bound16(h)
}

func (b bound16) float() float64 { return float64(math.Float32frombits(uint32(b) << 16)) }

// checkRef rebuilds the bounds when the average lengths have moved more
// than half again from the reference, so the bounds stay tight.
func (p *Partition) checkRef() {
	if p.live == 0 {
		return
	}
	drift := false
	for f := range NumFields {
		avg := max(float64(p.lens[f])/float64(p.live), 1)
		if p.ref[f] == 0 || avg > 1.5*p.ref[f] || avg < p.ref[f]/1.5 {
			drift = true
		}
	}
	if !drift {
		return
	}
	for f := range NumFields {
		p.ref[f] = max(float64(p.lens[f])/float64(p.live), 1)
	}
	for t := range p.terms {
		p.terms[t].maxr = [NumFields]bound16{}
		c := p.cursor(uint32(t))
		for ; c.doc() != math.MaxUint32; c.next() {
			if !p.docs[c.cur].dead {
				p.raise(uint32(t), c.posting())
			}
		}
	}
}

// Trim gives back the room the partition's lists keep for growth, after
// a bulk load.
func (p *Partition) Trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pack(0)
	for t, s := range p.skips {
		if cap(s) > len(s) {
			p.skips[t] = slices.Clone(s)
		}
	}
	// Clipping a slice would keep its room; a copy gives it back.
	p.docs, p.flens = shrink(p.docs), shrink(p.flens)
	p.toks, p.terms, p.stop = shrink(p.toks), shrink(p.terms), shrink(p.stop)
	p.enc = nil
	p.work.at, p.work.order, p.work.fl = nil, nil, nil
	p.dict.text, p.dict.ends = shrink(p.dict.text), shrink(p.dict.ends)
}

// shrink returns s, copied if it has more than an eighth more room than
// it uses.
func shrink[S ~[]E, E any](s S) S {
	if cap(s)-len(s) > len(s)/8 {
		return slices.Clone(s)
	}
	return s
}

// Tag returns the tag of the document with id, and whether the partition
// holds it.
func (p *Partition) Tag(id int64) (uint32, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n, ok := p.byID.find(p.docs, id)
	if !ok {
		return 0, false
	}
	return p.docs[n].tag, true
}

// Delete removes the document with id, if the partition holds it.
func (p *Partition) Delete(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deleteLocked(id)
}

func (p *Partition) deleteLocked(id int64) {
	n, ok := p.byID.find(p.docs, id)
	if !ok {
		return
	}
	d := &p.docs[n]
	d.dead = true
	p.live--
	p.dead++
	seen := map[uint32]bool{}
	var fl []uint32
	for f := range NumFields {
		fl = p.field(n, f, fl[:0])
		p.lens[f] -= int64(p.flens[n][f])
		for _, t := range fl {
			if !seen[t] && !p.stop[t] {
				seen[t] = true
				p.terms[t].df--
			}
		}
	}
	if p.dead > 256 && p.dead > p.live/2 {
		p.compactLocked()
	}
}

// compactLocked rebuilds the postings without dead documents.
func (p *Partition) compactLocked() {
	old, oldLens, oldToks := p.docs, p.flens, p.toks
	p.docs = make([]doc, 0, p.live)
	p.flens = make([]fieldLens, 0, p.live)
	p.toks = make([]byte, 0, len(p.toks)*p.live/max(1, p.live+p.dead))
	p.byID = docIDs{}
	p.byID.rebuild(nil, p.live)
	clear(p.skips)
	for t := range p.terms {
		p.terms[t] = term{}
	}
	p.post, p.waste = nil, 0
	p.ref = [NumFields]float64{}
	p.live, p.dead = 0, 0
	p.lens = [NumFields]int64{}
	from := uint32(0)
	for n, d := range old {
		if !d.dead {
			var ends [NumFields]uint32
			for f := range NumFields {
				ends[f] = d.ends[f] - from
			}
			p.addLocked(doc{id: d.id, tag: d.tag}, oldLens[n], oldToks[from:d.ends[NumFields-1]], ends)
		}
		from = d.ends[NumFields-1]
	}
	p.pack(0)
}

// Query is a ranked retrieval.
type Query struct {
	// Terms are the analysed query terms in order (see Analyze).
	Terms []string
	// Phrase is the query as a Sequence, stop-words in place, for the
	// phrase bonus; nil means Terms.
	Phrase []string
	// K is how many results to return.
	K int
	// Accept, when set, reports whether a document may be returned; it
	// is asked only of documents that could rank.
	Accept func(Candidate) bool
	// Exhaustive scores every posting, for tests of the pruning.
	Exhaustive bool
}

// Candidate is a document Query.Accept is asked about: its partition's
// place in the partitions searched, its id and its tag.
type Candidate struct {
	Part int
	ID   int64
	Tag  uint32
}

// Result is one ranked document.
type Result struct {
	ID     int64
	Score  float64 // 0..1
	Raw    float64 // the unsqueezed score
	Terms  []string
	Fields []Field // fields holding any of Terms
	// TermFields are, for each of Terms, the fields holding it: bit f
	// for Field f.
	TermFields []uint8
}

type cand struct {
	score  float64
	id     int64
	part   int
	doc    uint32
	phrase bool // found holding the whole phrase: its run's share is 1
}

// better orders candidates: higher score first, then the larger id (the
// newer record).
func better(a, b cand) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id > b.id
}

// Search ranks the documents of parts for q, with statistics (document
// counts, lengths, document frequencies) summed over parts only.
func Search(parts []*Partition, q Query, prm Params) []Result {
	for _, p := range parts {
		p.mu.RLock()
		defer p.mu.RUnlock()
	}
	if q.K <= 0 || len(q.Terms) == 0 {
		return nil
	}
	seq := q.Phrase
	if seq == nil {
		seq = q.Terms
	}
	uniq := unique(q.Terms)
	var n float64
	var lens [NumFields]float64
	for _, p := range parts {
		n += float64(p.live)
		for f := range NumFields {
			lens[f] += float64(p.lens[f])
		}
	}
	if n == 0 {
		return nil
	}
	var avg [NumFields]float64
	for f := range NumFields {
		avg[f] = max(lens[f]/n, 1)
	}
	s := scorer{prm: prm, avg: avg}
	for f := range NumFields {
		s.fixed[f] = 1 - prm.B[f]
		s.perLen[f] = prm.B[f] / avg[f]
	}
	idf := make([]float64, len(uniq))
	present := 0
	for i, t := range uniq {
		var df float64
		for _, p := range parts {
			if id, ok := p.dict.lookup(t); ok {
				df += float64(p.terms[id].df)
			}
		}
		idf[i] = math.Log(1 + (n-df+0.5)/(df+0.5))
		if df > 0 {
			present++
		}
	}
	if prm.Coord > 0 {
		s.coords = make([]float64, present)
		for n := range s.coords {
			s.coords[n] = math.Pow(float64(n)/float64(present), prm.Coord)
		}
	}
	// The top k by words alone. A record holding the whole phrase below
	// them is found next, among the records holding every word; keeping
	// more than k to look for partial phrases among cost a third of the
	// time and found nothing more on the labelled sets.
	h := &topK{k: q.K}
	for pi, p := range parts {
		s.search(p, pi, uniq, idf, q, h)
	}
	cands := h.items
	phrasal := prm.Phrase > 0 && (len(q.Terms) > 1 || len(q.Phrase) > 1)
	if phrasal {
		// A record holding the whole phrase may score below the top k on
		// words alone (a short mention among records that repeat the
		// words); find those among the records holding every word.
		in := make([]uint32, 0, len(cands))
		for pi, p := range parts {
			in = in[:0]
			for _, c := range cands {
				if c.part == pi {
					in = append(in, c.doc)
				}
			}
			slices.Sort(in)
			cands = s.phraseCands(p, pi, q, uniq, idf, in, cands)
		}
	}
	ids := make([][]uint32, len(parts)) // the phrase's term ids per partition
	for pi, p := range parts {
		ids[pi] = phraseIDs(p, q)
	}
	var top float64
	for _, c := range cands {
		top = max(top, c.score)
	}
	if prm.When > 0 && asksWhen(seq) {
		// A record saying when is likelier the answer to "when".
		for i := range cands {
			if holdsTime(parts[cands[i].part], cands[i].doc) {
				cands[i].score += prm.When * top
			}
		}
	}
	if phrasal {
		// The bonus is measured against the best score found, so
		// that a record holding the whole phrase rises above every record
		// holding the words apart, whatever the idf of the words.
		for i := range cands {
			c := &cands[i]
			share := 1.0
			if !c.phrase {
				share = runShare(parts[c.part], c.doc, ids[c.part], &s.sc)
			}
			c.score += prm.Phrase * share * share * top
		}
	}
	sortCands(cands)
	// Past the best k, a candidate can come back only as a neighbour of
	// one of them, and then at its raised score: its own is below the
	// k-th, and context finds its words again.
	cands = cands[:min(len(cands), q.K)]
	if prm.Context > 0 {
		cands = s.context(parts, q, uniq, idf, cands)[:len(cands)]
	}
	out := make([]Result, len(cands))
	for i, c := range cands {
		r := Result{ID: c.id, Raw: c.score, Score: squeeze(c.score, prm.Half)}
		p := parts[c.part]
		var inField [NumFields]bool
		r.Terms = make([]string, 0, len(uniq))
		r.TermFields = make([]uint8, 0, len(uniq))
		for ti, t := range uniq {
			id, ok := p.dict.lookup(t)
			if !ok {
				continue
			}
			var cur cursor
			p.start(&cur, id)
			cur.seek(c.doc)
			if cur.doc() != c.doc {
				continue
			}
			var set uint8
			for f, tf := range cur.posting().tf {
				if tf > 0 {
					inField[f] = true
					set |= 1 << f
				}
			}
			r.Terms = append(r.Terms, uniq[ti])
			r.TermFields = append(r.TermFields, set)
		}
		for f := range NumFields {
			if inField[f] {
				r.Fields = append(r.Fields, f)
			}
		}
		out[i] = r
	}
	return out
}

func sortCands(cands []cand) {
	slices.SortFunc(cands, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
}

// context raises the neighbours of the best k of the sorted cands (see
// Params.Context) and sorts them again.
func (s *scorer) context(parts []*Partition, q Query, uniq []string, idf []float64, cands []cand) []cand {
	type at struct {
		part int
		doc  uint32
	}
	where := make(map[at]int, len(cands))
	for i, c := range cands {
		where[at{c.part, c.doc}] = i
	}
	for _, src := range slices.Clone(cands[:min(len(cands), q.K)]) {
		p := parts[src.part]
		// From the source's score on words alone: a bonus for holding
		// the phrase or the date is the source's own, and passed on it
		// would put a turn beside a phrase holder above other holders.
		raised := s.prm.Context * min(src.score, s.docScore(p, src.doc, uniq, idf))
		for _, id := range [2]int64{src.id - 1, src.id + 1} {
			n, ok := p.byID.find(p.docs, id)
			if !ok || p.docs[n].dead {
				continue
			}
			if i, ok := where[at{src.part, n}]; ok {
				cands[i].score = max(cands[i].score, raised)
				continue
			}
			own := s.docScore(p, n, uniq, idf)
			d := &p.docs[n]
			// One holding no query word is left out: nothing in it
			// says why it was found.
			if own == 0 || q.Accept != nil && !q.Accept(Candidate{src.part, d.id, d.tag}) {
				continue
			}
			where[at{src.part, n}] = len(cands)
			cands = append(cands, cand{score: max(own, raised), id: d.id, part: src.part, doc: n})
		}
	}
	sortCands(cands)
	return cands
}

// docScore is document n's score for the terms uniq on words alone.
func (s *scorer) docScore(p *Partition, n uint32, uniq []string, idf []float64) float64 {
	var score float64
	held := 0
	var c cursor
	for i, t := range uniq {
		id, ok := p.dict.lookup(t)
		if !ok || p.terms[id].df == 0 {
			continue
		}
		p.start(&c, id)
		c.idf = idf[i]
		c.seek(n)
		if c.doc() == n {
			score += s.at(p, &c)
			held++
		}
	}
	return score * s.share(held)
}

func squeeze(raw, half float64) float64 {
	if raw <= 0 {
		return 0
	}
	return math.Round(raw/(raw+half)*1e4) / 1e4
}

func unique(ts []string) []string {
	var out []string
	for _, t := range ts {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// phraseIDs are the term ids of q's phrase in p, MaxUint32 for a term p
// lacks.
func phraseIDs(p *Partition, q Query) []uint32 {
	seq := q.Phrase
	if seq == nil {
		seq = q.Terms
	}
	ids := make([]uint32, len(seq))
	for i, t := range seq {
		id, ok := p.dict.lookup(t)
		if !ok {
			id = math.MaxUint32
		}
		ids[i] = id
	}
	return ids
}

// runShare is the longest run of the query's sequence q that stands, in
// order and adjacent, within one field of d and holds a word that is not a
// stop-word, as a share of the whole sequence, counted in adjacent pairs.
// Stop-words count inside a run: a quoted phrase is matched as written.
func runShare(p *Partition, n uint32, q []uint32, sc *scratch) float64 {
	if len(q) < 2 {
		return 0
	}
	sc.grow(len(q))
	// run[i] is the length of the run ending with q[i] at position
	// end[i]; words[i] how many of its terms are not stop-words.
	run, words, end := sc.run, sc.words, sc.end
	var mask uint64 // a quick test that a term is not in q
	for _, t := range q {
		mask |= 1 << (t & 63)
	}
	best := 0
	d, stop := &p.docs[n], p.stop
	from := p.docStart(n)
	for f := range NumFields {
		for i := range end {
			end[i] = -2
		}
		b := p.toks[from:d.ends[f]]
		from = d.ends[f]
		for j := 0; len(b) > 0; j++ {
			var t uint32
			if c := b[0]; c < 0x80 { // most term ids take one or two bytes
				t, b = uint32(c), b[1:]
			} else if len(b) > 1 && b[1] < 0x80 {
				t, b = uint32(c&0x7f)|uint32(b[1])<<7, b[2:]
			} else {
				v, n := binary.Uvarint(b)
				t, b = uint32(v), b[n:]
			}
			if mask&(1<<(t&63)) == 0 {
				continue
			}
			// Downwards, so that run[i-1] is still the run ending at j-1.
			for i := len(q) - 1; i >= 0; i-- {
				if q[i] != t {
					continue
				}
				if i > 0 && end[i-1] == j-1 {
					run[i], words[i] = run[i-1]+1, words[i-1]
				} else {
					run[i], words[i] = 1, 0
				}
				if !stop[t] {
					words[i]++
				}
				end[i] = j
				if words[i] > 0 && run[i] > best {
					best = run[i]
				}
			}
		}
	}
	if best < 2 {
		return 0
	}
	return float64(best-1) / float64(len(q)-1)
}

// scratch is the working memory of one search, reused from record to
// record so that ranking allocates little.
type scratch struct {
	run, words, end []int
}

func (sc *scratch) grow(n int) {
	if len(sc.run) < n {
		sc.run, sc.words, sc.end = make([]int, n), make([]int, n), make([]int, n)
	}
	sc.run, sc.words, sc.end = sc.run[:n], sc.words[:n], sc.end[:n]
}

type scorer struct {
	sc  scratch
	prm Params
	avg [NumFields]float64
	// A field's length normalisation is fixed + perLen·length: BM25's
	// 1 - b + b·length/avg, with the division done once per search.
	fixed, perLen [NumFields]float64
	coords        []float64 // by how many of the query's terms a document holds
}

// share is the factor coordination scales the score of a document
// holding n of the query's terms by.
func (s *scorer) share(n int) float64 {
	if n >= len(s.coords) {
		return 1
	}
	return s.coords[n]
}

// term scores one posting.
func (s *scorer) term(p *Partition, ps posting, idf float64) float64 {
	lens := &p.flens[ps.doc]
	var w float64
	for f := range NumFields {
		if ps.tf[f] == 0 {
			continue
		}
		w += s.prm.Weights[f] * float64(ps.tf[f]) / (s.fixed[f] + s.perLen[f]*float64(lens[f]))
	}
	return idf * w * (s.prm.K1 + 1) / (s.prm.K1 + w)
}

// at scores c's current posting.
func (s *scorer) at(p *Partition, c *cursor) float64 {
	h := c.buf[c.hdr]
	if f := sole[h&0xf]; f >= 0 && h>>4 != 0 {
		// The common case: the term is in one field, a few times.
		w := s.prm.Weights[f] * float64(h>>4) / (s.fixed[f] + s.perLen[f]*float64(p.flens[c.cur][f]))
		return c.idf * w * (s.prm.K1 + 1) / (s.prm.K1 + w)
	}
	return s.term(p, c.posting(), c.idf)
}

// bound is the most term id can add to a document's score in p.
func (s *scorer) bound(p *Partition, id uint32, idf float64) float64 {
	loose := idf * (s.prm.K1 + 1)
	if s.prm.B != DefaultParams.B || p.ref[0] == 0 {
		return loose
	}
	var w float64
	for f := range NumFields {
		w += s.prm.Weights[f] * p.terms[id].maxr[f].float() * max(1, s.avg[f]/p.ref[f])
	}
	// float32 bounds round; a little headroom keeps them bounds.
	w *= 1.0001
	return min(loose, idf*w*(s.prm.K1+1)/(s.prm.K1+w))
}

// maxPhraseChecks caps the records holding every query word that are
// checked for the phrase in one partition, and maxPhraseWalk the postings
// of the shortest list walked to find them. A check finds the phrase's
// rarest word in the record's encoded terms and reads its neighbours,
// much less than reading every term, so most of a rare quote's records
// holding its common words can be checked.
const (
	maxPhraseChecks = 25000
	maxPhraseWalk   = 30000
)

// phraseCands adds to cands the records of p that hold q's terms as a
// phrase and are not among them yet.
// in are the documents of p among cands, in order.
func (s *scorer) phraseCands(p *Partition, pi int, q Query, uniq []string, idf []float64, in []uint32, cands []cand) []cand {
	seq := phraseIDs(p, q)
	if slices.Contains(seq, math.MaxUint32) {
		return cands // a word of the phrase, a stop-word maybe, is in no document
	}
	cs := make([]*cursor, 0, len(uniq))
	var inSeq []bool // whether each cursor's term is one of the phrase's
	anchor := -1     // the phrase's rarest word, where it is looked for
	for i, t := range uniq {
		id, ok := p.dict.lookup(t)
		if !ok || p.terms[id].df == 0 {
			return cands
		}
		c := p.cursor(id)
		c.idf = idf[i]
		cs = append(cs, c)
		at := slices.Index(seq, id)
		inSeq = append(inSeq, at >= 0)
		if at >= 0 && (anchor < 0 || p.terms[id].df < p.terms[seq[anchor]].df) {
			anchor = at
		}
	}
	if anchor < 0 {
		return cands
	}
	// The shortest list leads; the next shortest, asked first, turns most
	// documents away.
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(cs[a].n, cs[b].n) })
	lead := order[0]
	if cs[lead].n > maxPhraseWalk {
		return cands
	}
	checks := 0
	// The records holding every word, found by leaping each list to the
	// document another is at.
walk:
	for cs[lead].doc() != math.MaxUint32 {
		at := cs[lead].doc()
		for _, i := range order[1:] {
			c := cs[i]
			c.seek(at)
			if c.doc() != at {
				cs[lead].seek(c.doc())
				continue walk
			}
		}
		d := &p.docs[at]
		for len(in) > 0 && in[0] < at {
			in = in[1:]
		}
		// A phrase stands in one field: one holding all its words.
		fields := uint8(1<<NumFields - 1)
		for i, c := range cs {
			if inSeq[i] {
				fields &= c.buf[c.hdr] & 0xf
			}
		}
		if d.dead || len(in) > 0 && in[0] == at || fields == 0 {
			cs[lead].next()
			continue
		}
		if checks++; checks > maxPhraseChecks {
			break
		}
		if holdsPhrase(p, at, seq, anchor, fields) && (q.Accept == nil || q.Accept(Candidate{pi, d.id, d.tag})) {
			var score float64
			for _, c := range cs {
				score += s.at(p, c)
			}
			cands = append(cands, cand{score: score, id: d.id, part: pi, doc: at, phrase: true})
		}
		cs[lead].next()
	}
	return cands
}

// holdsPhrase reports whether one of the fields of document n of p in
// the mask fields holds the term ids q in order, side by side. It looks
// for the bytes of q[anchor] among the field's encoded terms, and reads
// the terms on either side of each place it stands.
func holdsPhrase(p *Partition, n uint32, q []uint32, anchor int, fields uint8) bool {
	var enc [binary.MaxVarintLen32]byte
	key := enc[:binary.PutUvarint(enc[:], uint64(q[anchor]))]
	d := &p.docs[n]
	from := p.docStart(n)
	for f := range NumFields {
		b := p.toks[from:d.ends[f]]
		from = d.ends[f]
		if fields&(1<<f) == 0 {
			continue
		}
		for i := 0; ; {
			j := bytes.Index(b[i:], key)
			if j < 0 {
				break
			}
			j += i
			i = j + 1
			// A term's bytes start after the last byte of the one
			// before, the only byte of a uvarint below 0x80.
			if (j == 0 || b[j-1] < 0x80) && phraseAt(b, j, len(key), q, anchor) {
				return true
			}
		}
	}
	return false
}

// phraseAt reports whether the encoded terms b hold q with q[anchor] the
// n bytes at b[at:].
func phraseAt(b []byte, at, n int, q []uint32, anchor int) bool {
	off := at + n
	for _, t := range q[anchor+1:] {
		if off >= len(b) {
			return false
		}
		v, m := uvarint32(b[off:])
		if v != t {
			return false
		}
		off += m
	}
	end := at // just after the term before
	for k := anchor - 1; k >= 0; k-- {
		if end == 0 {
			return false
		}
		start := end - 1
		for start > 0 && b[start-1] >= 0x80 {
			start--
		}
		if v, _ := uvarint32(b[start:end]); v != q[k] {
			return false
		}
		end = start
	}
	return true
}

// search runs MaxScore over one partition, adding to h. Cursors are kept
// in order of their upper bounds; those whose bounds together cannot lift
// a document above the current k-th score are not walked, only probed for
// documents the others found.
func (s *scorer) search(p *Partition, pi int, terms []string, idf []float64, q Query, h *topK) {
	var cs []*cursor
	for i, t := range terms {
		id, ok := p.dict.lookup(t)
		if !ok || p.terms[id].df == 0 {
			continue
		}
		c := p.cursor(id)
		c.idf, c.ub = idf[i], s.bound(p, id, idf[i])
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return
	}
	slices.SortStableFunc(cs, func(a, b *cursor) int { return cmp.Compare(a.ub, b.ub) })
	prefix := make([]float64, len(cs))
	var sum float64
	for i, c := range cs {
		sum += c.ub
		prefix[i] = sum
	}
	ne := 0 // cursors before ne are non-essential
	for {
		theta := h.threshold()
		if !q.Exhaustive {
			// A document found only in the first ne+1 lists holds at
			// most ne+1 of the terms.
			for ne < len(cs) && prefix[ne]*s.share(ne+1) < theta {
				ne++
			}
		}
		if ne == len(cs) {
			return
		}
		next := uint32(math.MaxUint32)
		for _, c := range cs[ne:] {
			next = min(next, c.doc())
		}
		if next == math.MaxUint32 {
			return
		}
		var score float64
		held := 0
		for _, c := range cs[ne:] {
			if c.doc() == next {
				score += s.at(p, c)
				held++
				c.next()
			}
		}
		if ne > 0 && (score+prefix[ne-1])*s.share(held+ne) < theta {
			continue
		}
		i := ne - 1
		for ; i >= 0; i-- {
			if (score+prefix[i])*s.share(held+i+1) < theta {
				break
			}
			c := cs[i]
			c.seek(next)
			if c.doc() == next {
				score += s.at(p, c)
				held++
			}
		}
		if i >= 0 {
			continue // it cannot rank
		}
		score *= s.share(held)
		if score < theta {
			continue
		}
		// Only a document that would rank is read itself: a deleted one
		// is scored like the others and dropped here.
		d := &p.docs[next]
		if d.dead || q.Accept != nil && !q.Accept(Candidate{pi, d.id, d.tag}) {
			continue
		}
		h.push(cand{score: score, id: d.id, part: pi, doc: next})
	}
}

// topK keeps the k best candidates in a min-heap.
type topK struct {
	k     int
	items []cand
}

func (h *topK) threshold() float64 {
	if len(h.items) < h.k {
		return 0
	}
	return h.items[0].score
}

func (h *topK) push(c cand) {
	if len(h.items) < h.k {
		h.items = append(h.items, c)
		// sift up
		i := len(h.items) - 1
		for i > 0 {
			parent := (i - 1) / 2
			if !better(h.items[parent], h.items[i]) {
				break
			}
			h.items[parent], h.items[i] = h.items[i], h.items[parent]
			i = parent
		}
		return
	}
	if !better(c, h.items[0]) {
		return
	}
	h.items[0] = c
	i := 0
	for {
		l, r := 2*i+1, 2*i+2
		worst := i
		if l < len(h.items) && better(h.items[worst], h.items[l]) {
			worst = l
		}
		if r < len(h.items) && better(h.items[worst], h.items[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h.items[i], h.items[worst] = h.items[worst], h.items[i]
		i = worst
	}
}
