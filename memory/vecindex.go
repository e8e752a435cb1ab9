package memory

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
func (s *Store) WarmVectors(ctx context.Context, model string) error {
	var dims int
	err := s.db.QueryRowContext(ctx, `SELECT dims FROM embed_vectors WHERE model = $1 ORDER BY dims DESC LIMIT 1`, model).Scan(&dims)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	return s.vectors.catchUp(ctx, s.db, model, dims)
}

// vectorMarks are the vector change sequence as it stood before a restore:
// its last change and every record a vector index may hold.
type vectorMarks struct {
	seq  int64
	rids map[int64]struct{}
}

func readVectorMarks(ctx context.Context, db *sql.DB) (vectorMarks, error) {
	m := vectorMarks{rids: map[int64]struct{}{}}
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM embed_changes`).Scan(&m.seq); err != nil {
		return m, fmt.Errorf("read vector changes: %w", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT rid FROM embed_changes`)
	if err != nil {
		return m, fmt.Errorf("read vector changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rid int64
		if err := rows.Scan(&rid); err != nil {
			return m, fmt.Errorf("read vector changes: %w", err)
		}
		m.rids[rid] = struct{}{}
	}
	return m, rows.Err()
}

// restampVectorChanges gives every record a vector index of a running
// server may hold, from before a restore or after it, a change past the
// last one such an index applied: the restored database's sequence may
// stand past that index's while its rows name other records, and the
// index would keep the vectors of records the restore replaced.
func restampVectorChanges(ctx context.Context, tx *sql.Tx, before vectorMarks) error {
	rids := before.rids
	rows, err := tx.QueryContext(ctx, `SELECT rid FROM embed_changes UNION SELECT rid FROM embed_vectors`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var rid int64
		if err := rows.Scan(&rid); err != nil {
			rows.Close()
			return err
		}
		rids[rid] = struct{}{}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var after int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM embed_changes`).Scan(&after); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM embed_changes`); err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO embed_changes (seq, rid) VALUES ($1, $2)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	seq := max(before.seq, after)
	for rid := range rids {
		seq++
		if _, err := ins.ExecContext(ctx, seq, rid); err != nil {
			return err
		}
	}
	return nil
}
