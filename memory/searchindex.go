package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	cards   hitCards // of hits of all buckets

	// The statements every search runs, prepared once: preparing them
	// anew cost a search as much as running them.
	prep     sync.Mutex
	lastStmt *sql.Stmt                      // the store's last change
	hitsStmt *sql.Stmt                      // the records of a JSON array of rowids
	cardStmt *sql.Stmt                      // what a hit shows of them, without reading all
	inIDs    func(col, param string) string // the Store's
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
		{&x.hitsStmt, `SELECT r.rowid, r.project, ` + cols + ` FROM records r WHERE ` + x.inIDs("r.rowid", "$1")},
		{&x.cardStmt, `SELECT r.rowid, r.project, r.id, r.scope, r.type, r.key, r.description, r.body, r.expires_at
			FROM records r WHERE ` + x.inIDs("r.rowid", "$1")},
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
	id      uint64 // names its hits' cards (see cardKey)
	part    *index.Partition
	seq     int64 // the last change applied
	checked int64 // the store's last change when this bucket last caught up

	// What filters and the scope chain look at, kept beside the index so
	// candidates are judged without reading rows: a table of records'
	// entries, whose slot is each record's tag in the partition, and
	// chains of the entries of each name. Slots of removed records are
	// reused. A map of entries by rowid and one of slices of rowids by
	// name cost twice what this does.
	meta  []docMeta
	free  []uint32          // slots of meta not in use
	names map[uint64]uint32 // by name hash, the slot+1 of the first of the records of that name

	keys  []byte // records' keys end to end, found by docMeta.keyAt and keyLen
	waste int    // bytes of keys no record uses

	typeNames []Type            // types by docMeta.typ
	tagSets   [][]string        // the distinct tag lists; 0 is none
	tagIdx    map[string]uint32 // tag lists by their JSON

	// The process's cards of hits, which every change applied here
	// drops from; nil until a search keeps one of this bucket's.
	cards atomic.Pointer[hitCards]
}

func newBucket() *bucketIndex {
	return &bucketIndex{id: bucketIDs.Add(1), part: index.NewPartition(), names: map[uint64]uint32{},
		typeNames: []Type{Working, Episodic, Semantic, Procedural},
		tagSets:   [][]string{nil}, tagIdx: map[string]uint32{"[]": 0}}
}

// docMeta is a record's entry in its bucket.
type docMeta struct {
	name    uint64 // hash of type and key
	updated int64
	expires int64  // 0: never
	keyAt   uint32 // where the key starts in keys
	tags    uint32 // index in tagSets
	next    uint32 // slot+1 of the next record of the same name hash; 0 ends the chain
	keyLen  uint8  // keys are at most 100 bytes
	scope   int8
	typ     uint8 // index in typeNames
	used    bool
}

// key is the key of m.
func (b *bucketIndex) key(m *docMeta) []byte { return b.keys[m.keyAt : m.keyAt+uint32(m.keyLen)] }

// typ is the type of m.
func (b *bucketIndex) typ(m *docMeta) Type { return b.typeNames[m.typ] }

// typeCode is t's index in typeNames, added if new.
func (b *bucketIndex) typeCode(t string) uint8 {
	for i, n := range b.typeNames {
		if string(n) == t {
			return uint8(i)
		}
	}
	b.typeNames = append(b.typeNames, Type(t))
	return uint8(len(b.typeNames) - 1)
}

// add enters a record, which b lacks, and returns its slot.
func (b *bucketIndex) add(m docMeta, key string) uint32 {
	m.used = true
	m.keyAt, m.keyLen = uint32(len(b.keys)), uint8(min(len(key), 255))
	b.keys = append(b.keys, key[:m.keyLen]...)
	var i uint32
	if n := len(b.free); n > 0 {
		i, b.free = b.free[n-1], b.free[:n-1]
	} else {
		i = uint32(len(b.meta))
		b.meta = append(b.meta, docMeta{})
	}
	m.next = b.names[m.name]
	b.names[m.name] = i + 1
	b.meta[i] = m
	return i
}

// sameName calls fn with the entry of each record whose name hash is n.
func (b *bucketIndex) sameName(n uint64, fn func(o *docMeta) bool) {
	for at := b.names[n]; at != 0; at = b.meta[at-1].next {
		if !fn(&b.meta[at-1]) {
			return
		}
	}
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
			b = newBucket()
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
		r.updated_at, r.expires_at, r.created_at FROM changes c LEFT JOIN records r ON r.rowid = c.rid AND r.project = c.project
		WHERE c.project = $1 AND c.seq > $2 ORDER BY c.seq`, k, b.seq)
	if err != nil {
		return fmt.Errorf("read changes: %w", err)
	}
	defer rows.Close()
	applied := 0
	for rows.Next() {
		var seq, rid int64
		var rowid, sc, updated, expires, created sql.NullInt64
		var typ, key, desc, body, tags sql.NullString
		if err := rows.Scan(&seq, &rid, &rowid, &sc, &typ, &key, &desc, &body, &tags, &updated, &expires, &created); err != nil {
			return fmt.Errorf("read changes: %w", err)
		}
		b.seq = max(b.seq, seq)
		b.remove(rid)
		if h := b.cards.Load(); h != nil {
			h.drop(b, rid)
		}
		if !rowid.Valid {
			continue
		}
		applied++
		m := docMeta{name: nameHash(Type(typ.String), key.String), scope: int8(sc.Int64), typ: b.typeCode(typ.String), updated: updated.Int64, expires: expires.Int64}
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
		b.part.Put(index.Doc{ID: rid, Tag: b.add(m, key.String), Fields: [index.NumFields]string{
			key.String, desc.String, body.String, strings.Join(tagList, " "),
		}, Created: time.Unix(0, created.Int64).UTC()})
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

func (b *bucketIndex) remove(rid int64) {
	i, ok := b.part.Tag(rid)
	if !ok {
		return
	}
	m := &b.meta[i]
	// Unlink the slot from its name's chain.
	if first := b.names[m.name]; first == i+1 {
		if m.next == 0 {
			delete(b.names, m.name)
		} else {
			b.names[m.name] = m.next
		}
	} else {
		for at := first; at != 0; at = b.meta[at-1].next {
			if b.meta[at-1].next == i+1 {
				b.meta[at-1].next = m.next
				break
			}
		}
	}
	b.waste += int(m.keyLen)
	*m = docMeta{}
	b.free = append(b.free, i)
	if b.waste > 4096 && b.waste > len(b.keys)/2 {
		b.packKeys()
	}
	b.part.Delete(rid)
}

// packKeys copies the keys in use into a new array, leaving out those of
// removed records.
func (b *bucketIndex) packKeys() {
	keys := make([]byte, 0, len(b.keys)-b.waste)
	for i := range b.meta {
		m := &b.meta[i]
		if m.used {
			at := uint32(len(keys))
			keys = append(keys, b.key(m)...)
			m.keyAt = at
		}
	}
	b.keys, b.waste = keys, 0
}
