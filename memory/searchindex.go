package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
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

	// The statements every search runs, prepared once: preparing them
	// anew cost a search as much as running them.
	prep     sync.Mutex
	lastStmt *sql.Stmt // the store's last change
	hitsStmt *sql.Stmt // the records of a JSON array of rowids
	cardStmt *sql.Stmt // what a hit shows of them, without reading all
}

// statements returns the prepared statements of searches.
func (x *searchIndex) statements(ctx context.Context, db *sql.DB) (last, hits, cards *sql.Stmt, err error) {
	x.prep.Lock()
	defer x.prep.Unlock()
	for _, st := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&x.lastStmt, `SELECT COALESCE(MAX(seq), 0) FROM changes`},
		{&x.hitsStmt, `SELECT r.rowid, r.project, ` + cols + ` FROM records r WHERE r.rowid IN (SELECT value FROM json_each(?))`},
		{&x.cardStmt, `SELECT r.rowid, r.project, r.id, r.scope, r.type, r.key, r.description, r.body, r.expires_at
			FROM records r WHERE r.rowid IN (SELECT value FROM json_each(?))`},
	} {
		if *st.stmt == nil {
			if *st.stmt, err = db.PrepareContext(ctx, st.query); err != nil {
				return nil, nil, nil, fmt.Errorf("prepare: %w", err)
			}
		}
	}
	return x.lastStmt, x.hitsStmt, x.cardStmt, nil
}

type bucketIndex struct {
	part    *index.Partition
	seq     int64 // the last change applied
	checked int64 // the store's last change when this bucket last caught up
	meta    map[int64]docMeta
	names   map[uint64][]int64 // records by a hash of their type and key
	tagSets [][]string         // the distinct tag lists; 0 is none
	tagIdx  map[string]uint32  // tag lists by their JSON
}

// docMeta is what filters and the scope chain look at, kept beside the
// index so candidates are judged without reading rows.
type docMeta struct {
	name    uint64 // hash of type and key
	key     string
	updated int64
	expires int64  // 0: never
	tags    uint32 // index in tagSets
	scope   int8
	typ     Type
}

// nameHash identifies a type and key; records of different names that
// collide are told apart by their keys.
func nameHash(t Type, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(t))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()
}

func (m *docMeta) visible(now int64) bool { return m.expires == 0 || m.expires > now }

// catchUp brings the buckets of keys up to date and returns them.
func (x *searchIndex) catchUp(ctx context.Context, db *sql.DB, keys []string) ([]*bucketIndex, error) {
	lastStmt, _, _, err := x.statements(ctx, db)
	if err != nil {
		return nil, err
	}
	var last int64
	if err := lastStmt.QueryRowContext(ctx).Scan(&last); err != nil {
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
			b = &bucketIndex{part: index.NewPartition(), meta: map[int64]docMeta{}, names: map[uint64][]int64{},
				tagSets: [][]string{nil}, tagIdx: map[string]uint32{"[]": 0}}
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
	applied := 0
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
		applied++
		m := docMeta{name: nameHash(Type(typ.String), key.String), key: key.String, scope: int8(sc.Int64), typ: types[typ.String], updated: updated.Int64, expires: expires.Int64}
		if m.typ == "" {
			m.typ = Type(typ.String)
		}
		var tagList []string
		if err := json.Unmarshal([]byte(tags.String), &tagList); err != nil {
			return fmt.Errorf("record %d tags: %w", rid, err)
		}
		if i, ok := b.tagIdx[tags.String]; ok {
			m.tags = i
		} else if len(tagList) > 0 {
			m.tags = uint32(len(b.tagSets))
			b.tagSets = append(b.tagSets, tagList)
			b.tagIdx[tags.String] = m.tags
		}
		b.meta[rid] = m
		b.names[m.name] = append(b.names[m.name], rid)
		b.part.Put(index.Doc{ID: rid, Fields: [index.NumFields]string{
			key.String, desc.String, body.String, strings.Join(tagList, " "),
		}})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	if applied > 256 {
		b.part.Trim()
	}
	b.checked = last
	return nil
}

// types shares one copy of each type's name among the records.
var types = map[string]Type{string(Working): Working, string(Episodic): Episodic, string(Semantic): Semantic, string(Procedural): Procedural}

func (b *bucketIndex) remove(rid int64) {
	m, ok := b.meta[rid]
	if !ok {
		return
	}
	delete(b.meta, rid)
	n := m.name
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
