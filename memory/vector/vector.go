// Package vector keeps vectors in memory, quantized to int8, and finds
// those nearest a query by brute force: cosine similarity over every row
// of the partitions a caller may see, split across the CPUs for large
// indexes. Up to about 100,000 vectors a scan takes tens of milliseconds.
//
// It is pure: vectors in, ranked ids out; no SQL, no files. It imports only
// the standard library.
package vector

import (
	"math"
	"runtime"
	"slices"
	"sync"
)

// Index holds vectors of one length, each under an id, in a partition
// and at a level the caller's visibility rule looks at. It is not safe
// for concurrent use while it changes; concurrent Nearest calls are fine.
type Index struct {
	dims int

	pos     map[int64]int // row of each id
	ids     []int64
	part    []int32 // index into parts
	level   []int8
	scale   []float32 // a row's cosine with a query is dot × scale × the query's scale
	data    []int8    // dims per row
	parts   []string
	partIdx map[string]int32
}

// New returns an empty index of vectors of dims dimensions.
func New(dims int) *Index {
	return &Index{dims: dims, pos: map[int64]int{}, partIdx: map[string]int32{}}
}

// Dims is the length of the index's vectors.
func (x *Index) Dims() int { return x.dims }

// Len is how many vectors the index holds.
func (x *Index) Len() int { return len(x.ids) }

// Put stores v, which must have Dims components, under id, replacing
// what id held. v need not be of unit length.
func (x *Index) Put(id int64, partition string, level int8, v []float32) {
	x.Delete(id)
	p, ok := x.partIdx[partition]
	if !ok {
		p = int32(len(x.parts))
		x.parts = append(x.parts, partition)
		x.partIdx[partition] = p
	}
	q, scale := Quantize(Unit(v))
	x.pos[id] = len(x.ids)
	x.ids = append(x.ids, id)
	x.part = append(x.part, p)
	x.level = append(x.level, level)
	x.scale = append(x.scale, scale)
	x.data = append(x.data, q...)
}

// Delete drops id's vector, if any, moving the last row into its place.
func (x *Index) Delete(id int64) {
	i, ok := x.pos[id]
	if !ok {
		return
	}
	delete(x.pos, id)
	last := len(x.ids) - 1
	if i != last {
		moved := x.ids[last]
		x.ids[i], x.part[i], x.level[i], x.scale[i] = moved, x.part[last], x.level[last], x.scale[last]
		copy(x.data[i*x.dims:(i+1)*x.dims], x.data[last*x.dims:])
		x.pos[moved] = i
	}
	x.ids, x.part, x.level, x.scale = x.ids[:last], x.part[:last], x.level[:last], x.scale[:last]
	x.data = x.data[:last*x.dims]
}

// Unit is v scaled to unit length, or nil for an empty, zero or
// non-finite vector.
func Unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return nil
	}
	n = math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// Quantize maps v to int8s, its largest component to ±127, and returns
// the factor back.
func Quantize(v []float32) ([]int8, float32) {
	var m float32
	for _, f := range v {
		m = max(m, float32(math.Abs(float64(f))))
	}
	q := make([]int8, len(v))
	if m == 0 {
		return q, 0
	}
	k := 127 / m
	for i, f := range v {
		q[i] = int8(math.Round(float64(f * k)))
	}
	return q, m / 127
}

// Dot is the dot product of two int8 vectors of equal length. Eight
// products a round, on fixed-size views, so the compiler drops the
// bounds checks.
func Dot(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	for len(a) >= 8 {
		x, y := a[:8:8], b[:8:8]
		s0 += int32(x[0])*int32(y[0]) + int32(x[4])*int32(y[4])
		s1 += int32(x[1])*int32(y[1]) + int32(x[5])*int32(y[5])
		s2 += int32(x[2])*int32(y[2]) + int32(x[6])*int32(y[6])
		s3 += int32(x[3])*int32(y[3]) + int32(x[7])*int32(y[7])
		a, b = a[8:], b[8:]
	}
	for i := range a {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// Match is an id and its vector's cosine similarity with a query.
type Match struct {
	ID  int64
	Sim float32
}

// Visible says whether rows of a partition may be seen, and from which
// level up.
type Visible func(partition string) (ok bool, minLevel int8)

// Nearest returns up to k of the rows visible admits most similar to q
// (of Dims components), best first, ties by id, leaving out those not
// similar at all (cosine <= 0).
func (x *Index) Nearest(q []float32, k int, visible Visible) []Match {
	n := len(x.ids)
	u := Unit(q)
	if n == 0 || k <= 0 || len(u) != x.dims {
		return nil
	}
	allow := make([]bool, len(x.parts))
	from := make([]int8, len(x.parts))
	for i, p := range x.parts {
		allow[i], from[i] = visible(p)
	}
	qq, qscale := Quantize(u)
	scan := func(lo, hi int) []Match {
		h := topK{k: k}
		for i := lo; i < hi; i++ {
			p := x.part[i]
			if !allow[p] || x.level[i] < from[p] {
				continue
			}
			sim := float32(Dot(qq, x.data[i*x.dims:(i+1)*x.dims])) * x.scale[i] * qscale
			if sim > 0 {
				h.push(Match{x.ids[i], sim})
			}
		}
		return h.items
	}
	parts := 1
	if n >= 16384 {
		parts = min(runtime.GOMAXPROCS(0), 8)
	}
	var found []Match
	if parts == 1 {
		found = scan(0, n)
	} else {
		res := make([][]Match, parts)
		var wg sync.WaitGroup
		for p := range parts {
			wg.Go(func() { res[p] = scan(p*n/parts, (p+1)*n/parts) })
		}
		wg.Wait()
		for _, r := range res {
			found = append(found, r...)
		}
	}
	slices.SortFunc(found, func(a, b Match) int {
		switch {
		case a.Sim > b.Sim:
			return -1
		case a.Sim < b.Sim:
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return found[:min(k, len(found))]
}

// topK keeps the k most similar matches pushed, in a min-heap.
type topK struct {
	k     int
	items []Match
}

func (h *topK) push(m Match) {
	if len(h.items) < h.k {
		h.items = append(h.items, m)
		for i := len(h.items) - 1; i > 0; {
			p := (i - 1) / 2
			if h.items[p].Sim <= h.items[i].Sim {
				break
			}
			h.items[p], h.items[i] = h.items[i], h.items[p]
			i = p
		}
		return
	}
	if m.Sim <= h.items[0].Sim {
		return
	}
	h.items[0] = m
	for i := 0; ; {
		l, r, s := 2*i+1, 2*i+2, i
		if l < len(h.items) && h.items[l].Sim < h.items[s].Sim {
			s = l
		}
		if r < len(h.items) && h.items[r].Sim < h.items[s].Sim {
			s = r
		}
		if s == i {
			break
		}
		h.items[i], h.items[s] = h.items[s], h.items[i]
		i = s
	}
}
