package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"prom.codes/memory-mcp/scope"
)

// vectorIndex is this process's copy of one model's vectors, quantized to
// int8, searched by brute force. It is loaded on the first semantic
// search and brought up to date before every one from embed_changes,
// which triggers feed whenever a vector is stored or dropped.
type vectorIndex struct {
	mu    sync.RWMutex // write-held while catching up, read-held while searching
	model string
	dims  int
	last  int64 // the last change applied

	pos       map[int64]int // row of each record
	rids      []int64
	bucket    []int32 // index into buckets
	level     []int8
	scale     []float32 // a row's cosine with a query is dot × scale × the query's scale
	data      []int8    // dims per row
	buckets   []string
	bucketIdx map[string]int32
}

// reset empties x for model's vectors of dims dimensions.
func (x *vectorIndex) reset(model string, dims int) {
	x.model, x.dims, x.last = model, dims, 0
	x.pos, x.bucketIdx = map[int64]int{}, map[string]int32{}
	x.rids, x.bucket, x.level, x.scale, x.data, x.buckets = nil, nil, nil, nil, nil, nil
}

// catchUp brings x up to date with model's vectors of dims dimensions.
func (x *vectorIndex) catchUp(ctx context.Context, db *sql.DB, model string, dims int) error {
	var last int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM embed_changes`).Scan(&last); err != nil {
		return fmt.Errorf("read vector changes: %w", err)
	}
	x.mu.RLock()
	fresh := x.pos != nil && x.model == model && x.dims == dims && x.last == last
	x.mu.RUnlock()
	if fresh {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	// A sequence that went back is another database's (a restore): start over.
	if x.pos == nil || x.model != model || x.dims != dims || last < x.last {
		x.reset(model, dims)
	}
	rows, err := db.QueryContext(ctx, `SELECT c.seq, c.rid, v.vec, r.project, r.scope FROM embed_changes c
		LEFT JOIN embed_vectors v ON v.rid = c.rid AND v.model = ? AND v.dims = ?
		LEFT JOIN records r ON r.rowid = c.rid
		WHERE c.seq > ? ORDER BY c.seq`, model, dims, x.last)
	if err != nil {
		return fmt.Errorf("read vector changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, rid int64
		var vec []byte
		var project sql.NullString
		var level sql.NullInt64
		if err := rows.Scan(&seq, &rid, &vec, &project, &level); err != nil {
			return fmt.Errorf("read vector changes: %w", err)
		}
		x.last = max(x.last, seq)
		x.remove(rid)
		if vec == nil || !project.Valid || len(vec) != 4*dims {
			continue
		}
		x.add(rid, project.String, int8(level.Int64), decodeVector(vec))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read vector changes: %w", err)
	}
	return nil
}

func (x *vectorIndex) add(rid int64, bucket string, level int8, v []float32) {
	b, ok := x.bucketIdx[bucket]
	if !ok {
		b = int32(len(x.buckets))
		x.buckets = append(x.buckets, bucket)
		x.bucketIdx[bucket] = b
	}
	q, scale := quantize(v)
	x.pos[rid] = len(x.rids)
	x.rids = append(x.rids, rid)
	x.bucket = append(x.bucket, b)
	x.level = append(x.level, level)
	x.scale = append(x.scale, scale)
	x.data = append(x.data, q...)
}

// remove drops rid's row, moving the last row into its place.
func (x *vectorIndex) remove(rid int64) {
	i, ok := x.pos[rid]
	if !ok {
		return
	}
	delete(x.pos, rid)
	last := len(x.rids) - 1
	if i != last {
		moved := x.rids[last]
		x.rids[i], x.bucket[i], x.level[i], x.scale[i] = moved, x.bucket[last], x.level[last], x.scale[last]
		copy(x.data[i*x.dims:(i+1)*x.dims], x.data[last*x.dims:])
		x.pos[moved] = i
	}
	x.rids, x.bucket, x.level, x.scale = x.rids[:last], x.bucket[:last], x.level[:last], x.scale[:last]
	x.data = x.data[:last*x.dims]
}

// quantize maps v to int8s, its largest component to ±127, and returns
// the factor back.
func quantize(v []float32) ([]int8, float32) {
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

// dot8 is the dot product of two int8 vectors of equal length. Eight
// products a round, on fixed-size views, so the compiler drops the
// bounds checks.
func dot8(a, b []int8) int32 {
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

// neighbour is a record and its cosine similarity with a query.
type neighbour struct {
	rid int64
	sim float32
}

// nearest returns up to k rows of the buckets keys (the global one only
// from level global up) most similar to the unit vector q, best first,
// leaving out those not similar at all (cosine <= 0). The caller holds
// x.mu for reading.
func (x *vectorIndex) nearest(q []float32, keys []string, global scope.Level, k int) []neighbour {
	n := len(x.rids)
	if n == 0 || k <= 0 {
		return nil
	}
	// allow[b]: 0 not visible, 1 visible, 2 the global bucket (check level).
	allow := make([]uint8, len(x.buckets))
	for i, b := range x.buckets {
		if slices.Contains(keys, b) {
			allow[i] = 1
			if b == "" {
				allow[i] = 2
			}
		}
	}
	qq, qscale := quantize(q)
	scan := func(lo, hi int) []neighbour {
		h := topK{k: k}
		for i := lo; i < hi; i++ {
			switch allow[x.bucket[i]] {
			case 0:
				continue
			case 2:
				if scope.Level(x.level[i]) < global {
					continue
				}
			}
			sim := float32(dot8(qq, x.data[i*x.dims:(i+1)*x.dims])) * x.scale[i] * qscale
			if sim > 0 {
				h.push(neighbour{x.rids[i], sim})
			}
		}
		return h.items
	}
	parts := 1
	if n >= 16384 {
		parts = min(runtime.GOMAXPROCS(0), 8)
	}
	var found []neighbour
	if parts == 1 {
		found = scan(0, n)
	} else {
		res := make([][]neighbour, parts)
		var wg sync.WaitGroup
		for p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[p] = scan(p*n/parts, (p+1)*n/parts)
			}()
		}
		wg.Wait()
		for _, r := range res {
			found = append(found, r...)
		}
	}
	slices.SortFunc(found, func(a, b neighbour) int {
		if a.sim != b.sim {
			if a.sim > b.sim {
				return -1
			}
			return 1
		}
		if a.rid < b.rid {
			return -1
		}
		return 1
	})
	return found[:min(k, len(found))]
}

// topK keeps the k most similar neighbours pushed, in a min-heap.
type topK struct {
	k     int
	items []neighbour
}

func (h *topK) push(n neighbour) {
	if len(h.items) < h.k {
		h.items = append(h.items, n)
		for i := len(h.items) - 1; i > 0; {
			p := (i - 1) / 2
			if h.items[p].sim <= h.items[i].sim {
				break
			}
			h.items[p], h.items[i] = h.items[i], h.items[p]
			i = p
		}
		return
	}
	if n.sim <= h.items[0].sim {
		return
	}
	h.items[0] = n
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.items) && h.items[l].sim < h.items[m].sim {
			m = l
		}
		if r < len(h.items) && h.items[r].sim < h.items[m].sim {
			m = r
		}
		if m == i {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// WarmVectors loads model's vectors into memory ahead of the first
// semantic search, which would otherwise wait for them.
func (s *Store) WarmVectors(ctx context.Context, model string) error {
	var dims int
	err := s.db.QueryRowContext(ctx, `SELECT dims FROM embed_vectors WHERE model = ? ORDER BY dims DESC LIMIT 1`, model).Scan(&dims)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	return s.vectors.catchUp(ctx, s.db, model, dims)
}
