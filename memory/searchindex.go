package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"prom.codes/memory-mcp/memory/index"
)

// searchIndex is this process's in-memory search index: one partition per
// bucket (a project, or the shared global bucket ""), each loaded on its
// first search and brought up to date before every search from the
// changes table, which every writer in every process feeds through
// triggers. It reads plain SQL only.
type searchIndex struct {
	mu      sync.RWMutex // write-held while catching up, read-held while searching
	buckets map[string]*bucketIndex
}

type bucketIndex struct {
	part    *index.Partition
	seq     int64 // the last change applied
	checked int64 // the store's last change when this bucket last caught up
	meta    map[int64]*docMeta
	names   map[typeKey][]int64 // records of each name, by rowid
}

type typeKey struct {
	typ Type
	key string
}

// docMeta is what filters and the scope chain look at, kept beside the
// index so candidates are judged without reading rows.
type docMeta struct {
	scope   int
	typ     Type
	key     string
	tags    []string
	updated int64
	expires int64 // 0: never
}

func (m *docMeta) visible(now int64) bool { return m.expires == 0 || m.expires > now }

// catchUp brings the buckets of keys up to date and returns them.
func (x *searchIndex) catchUp(ctx context.Context, db *sql.DB, keys []string) ([]*bucketIndex, error) {
	var last int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&last); err != nil {
		return nil, fmt.Errorf("read change sequence: %w", err)
	}
	out := make([]*bucketIndex, len(keys))
	x.mu.RLock()
	fresh := x.buckets != nil
	for i, k := range keys {
		b := x.buckets[k]
		if b == nil || b.checked != last {
			fresh = false
		}
		out[i] = b
	}
	x.mu.RUnlock()
	if fresh {
		return out, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.buckets == nil {
		x.buckets = map[string]*bucketIndex{}
	}
	for i, k := range keys {
		b := x.buckets[k]
		if b == nil {
			b = &bucketIndex{part: index.NewPartition(), meta: map[int64]*docMeta{}, names: map[typeKey][]int64{}}
		}
		if b.checked != last {
			if err := b.apply(ctx, db, k, last); err != nil {
				return nil, err
			}
		}
		x.buckets[k] = b
		out[i] = b
	}
	return out, nil
}

// apply reads and applies bucket k's changes since b.seq. Every change up
// to last was committed before this read began, so all of them are seen.
func (b *bucketIndex) apply(ctx context.Context, db *sql.DB, k string, last int64) error {
	rows, err := db.QueryContext(ctx, `SELECT c.seq, c.rid, r.rowid, r.scope, r.type, r.key, r.description, r.body, r.tags,
		r.updated_at, r.expires_at FROM changes c LEFT JOIN records r ON r.rowid = c.rid AND r.project = c.project
		WHERE c.project = ? AND c.seq > ? ORDER BY c.seq`, k, b.seq)
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, rid int64
		var rowid, sc, updated, expires sql.NullInt64
		var typ, key, desc, body, tags sql.NullString
		if err := rows.Scan(&seq, &rid, &rowid, &sc, &typ, &key, &desc, &body, &tags, &updated, &expires); err != nil {
			return fmt.Errorf("read changes: %w", err)
		}
		b.seq = max(b.seq, seq)
		b.remove(rid)
		if !rowid.Valid {
			continue
		}
		m := &docMeta{scope: int(sc.Int64), typ: Type(typ.String), key: key.String, updated: updated.Int64, expires: expires.Int64}
		if err := json.Unmarshal([]byte(tags.String), &m.tags); err != nil {
			return fmt.Errorf("record %d tags: %w", rid, err)
		}
		b.meta[rid] = m
		n := typeKey{m.typ, m.key}
		b.names[n] = append(b.names[n], rid)
		b.part.Put(index.Doc{ID: rid, Fields: [index.NumFields]string{
			m.key, desc.String, body.String, strings.Join(m.tags, " "),
		}})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	b.checked = last
	return nil
}

func (b *bucketIndex) remove(rid int64) {
	m := b.meta[rid]
	if m == nil {
		return
	}
	delete(b.meta, rid)
	n := typeKey{m.typ, m.key}
	ids := b.names[n]
	for i, id := range ids {
		if id == rid {
			ids = append(ids[:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(b.names, n)
	} else {
		b.names[n] = ids
	}
	b.part.Delete(rid)
}
