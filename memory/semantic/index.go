package semantic

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"prom.codes/memory-mcp/memory/vector"
	"prom.codes/memory-mcp/scope"
)

// vectorIndex is this process's copy of one model's vectors, searched by
// brute force (see memory/vector). It is loaded when the server starts or
// on the first semantic search, and brought up to date before every one
// from embed_changes, which triggers feed whenever a vector is stored or
// dropped.
type vectorIndex struct {
	mu    sync.RWMutex // write-held while catching up, read-held while searching
	model string
	last  int64 // the last change applied
	idx   *vector.Index
}

// catchUp brings x up to date with model's vectors of dims dimensions.
func (x *vectorIndex) catchUp(ctx context.Context, db *sql.DB, model string, dims int) error {
	var last int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM embed_changes`).Scan(&last); err != nil {
		return fmt.Errorf("read vector changes: %w", err)
	}
	x.mu.RLock()
	fresh := x.idx != nil && x.model == model && x.idx.Dims() == dims && x.last == last
	x.mu.RUnlock()
	if fresh {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	// A sequence that went back is another database's (a restore): start over.
	if x.idx == nil || x.model != model || x.idx.Dims() != dims || last < x.last {
		x.model, x.last, x.idx = model, 0, vector.New(dims)
	}
	rows, err := db.QueryContext(ctx, `SELECT c.seq, c.rid, v.vec, r.project, r.scope FROM embed_changes c
		LEFT JOIN embed_vectors v ON v.rid = c.rid AND v.model = $1 AND v.dims = $2
		LEFT JOIN records r ON r.rowid = c.rid
		WHERE c.seq > $3 ORDER BY c.seq`, model, dims, x.last)
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
		x.idx.Delete(rid)
		if vec == nil || !project.Valid || len(vec) != 4*dims {
			continue
		}
		x.idx.Put(rid, project.String, int8(level.Int64), decodeVector(vec))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read vector changes: %w", err)
	}
	return nil
}

// nearest returns up to k records of the buckets keys (the global one
// only from level global up) whose vectors are most similar to q.
func (x *vectorIndex) nearest(q []float32, keys []string, global scope.Level, k int) []vector.Match {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return nil
	}
	return x.idx.Nearest(q, k, func(bucket string) (bool, int8) {
		for _, key := range keys {
			if key == bucket {
				if bucket == "" {
					return true, int8(global)
				}
				return true, 0
			}
		}
		return false, 0
	})
}

// WarmVectors loads model's vectors into memory ahead of the first
// semantic search, which would otherwise wait for them.
func (s *Index) WarmVectors(ctx context.Context, model string) error {
	var dims int
	err := s.st.DB().QueryRowContext(ctx, `SELECT dims FROM embed_vectors WHERE model = $1 ORDER BY dims DESC LIMIT 1`, model).Scan(&dims)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	return s.vectors.catchUp(ctx, s.st.DB(), model, dims)
}
