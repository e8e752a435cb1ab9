package memory

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"prom.codes/memory-mcp/scope"
)

const cols = `r.id, r.scope, r.type, r.key, r.description, r.body, r.tags, r.confidence, r.use_count,
	r.last_accessed_at, r.created_at, r.updated_at, r.expires_at, r.session_id, r.source, r.metadata`

// colsNoBody reads ” in place of the body, for lists.
const colsNoBody = `r.id, r.scope, r.type, r.key, r.description, '', r.tags, r.confidence, r.use_count,
	r.last_accessed_at, r.created_at, r.updated_at, r.expires_at, r.session_id, r.source, r.metadata`

// visible holds for records this project may see that have not expired:
// those in its own buckets (see Bucket), and in the global one from level
// @g up.
const visible = `r.project IN (@p, @w, @t, '') AND (r.project <> '' OR r.scope >= @g) AND (r.expires_at IS NULL OR r.expires_at > @now)`

// effective holds for visible records no narrower visible record shadows.
const effective = visible + ` AND NOT EXISTS (SELECT 1 FROM records n WHERE n.type = r.type AND n.key = r.key
	AND n.scope < r.scope AND n.project IN (@p, @w, @t, '') AND (n.project <> '' OR n.scope >= @g) AND (n.expires_at IS NULL OR n.expires_at > @now))`

type scanner interface{ Scan(...any) error }

func scanRecord(row scanner) (Record, error) {
	return newRecordScan().scan(row)
}

// recordScan scans rows of cols into records. Its targets are made once
// for many rows: handed to Scan behind interfaces, each would otherwise
// be allocated anew for every row.
type recordScan struct {
	r                    Record
	sc                   int
	typ, tags, src, meta string
	last, exp            sql.NullInt64
	created, updated     int64
	dest                 []any
}

// newRecordScan returns a recordScan for rows whose first columns go to
// first, then cols.
func newRecordScan(first ...any) *recordScan {
	s := &recordScan{}
	r := &s.r
	s.dest = append(first, &r.ID, &s.sc, &s.typ, &r.Key, &r.Description, &r.Body, &s.tags, &r.Confidence, &r.UseCount,
		&s.last, &s.created, &s.updated, &s.exp, &r.SessionID, &s.src, &s.meta)
	return s
}

func (s *recordScan) scan(row scanner) (Record, error) {
	s.r = Record{}
	if err := row.Scan(s.dest...); err != nil {
		return Record{}, err
	}
	r := s.r
	r.Scope, r.Type, r.Source = scope.Level(s.sc), Type(s.typ), Source(s.src)
	if t, ok := types[s.typ]; ok {
		r.Type = t
	}
	r.LastAccessedAt, r.ExpiresAt = fromNanos(s.last), fromNanos(s.exp)
	r.CreatedAt, r.UpdatedAt = time.Unix(0, s.created).UTC(), time.Unix(0, s.updated).UTC()
	// Most records have neither tags nor metadata: "[]" and "{}" are not
	// decoded, which cost a read of many rows a third of its time.
	if s.tags != "[]" {
		if err := json.Unmarshal([]byte(s.tags), &r.Tags); err != nil {
			return Record{}, fmt.Errorf("record %s tags: %w", r.ID, err)
		}
		if len(r.Tags) == 0 {
			r.Tags = nil
		}
	}
	if s.meta != "{}" {
		if err := json.Unmarshal([]byte(s.meta), &r.Metadata); err != nil {
			return Record{}, fmt.Errorf("record %s metadata: %w", r.ID, err)
		}
		if len(r.Metadata) == 0 {
			r.Metadata = nil
		}
	}
	return r, nil
}

type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

func getOne(ctx context.Context, q querier, where string, args ...any) (Record, error) {
	r, err := scanRecord(q.QueryRowContext(ctx, `SELECT `+cols+` FROM records r `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	return r, err
}

func queryRecords(ctx context.Context, q querier, query string, args ...any) ([]Record, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	sc := newRecordScan()
	for rows.Next() {
		r, err := sc.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) args(p scope.Identity, more ...any) []any {
	return append([]any{sql.Named("p", string(p)), sql.Named("w", Bucket(p, scope.Workspace)), sql.Named("t", Bucket(p, scope.Tenant)),
		sql.Named("g", int(globalFrom(p))), sql.Named("now", s.now().UnixNano())}, more...)
}

// The queries of resolve by key, whole: made on every read, they cost it
// a kilobyte.
const (
	byKeyWhere   = `SELECT ` + cols + ` FROM records r WHERE r.key = @key AND (@type = '' OR r.type = @type) AND `
	byKey        = byKeyWhere + effective + ` ORDER BY r.type`
	byKeyInScope = byKeyWhere + visible + ` AND r.scope = @scope ORDER BY r.type`
)

// resolve finds the one record sel picks, as project p sees it.
func (s *Store) resolve(ctx context.Context, q querier, p scope.Identity, sel Selector) (Record, error) {
	if sel.ID != "" {
		if !storableText(sel.ID) {
			// No stored id holds these bytes (PostgreSQL could not).
			return Record{}, Errorf(CodeNotFound, "id", "matches no record visible here")
		}
		r, err := getOne(ctx, q, `WHERE r.id = @id AND `+visible, s.b.NamedArgs(s.args(p, sql.Named("id", sel.ID)))...)
		if errors.Is(err, ErrNotFound) {
			return Record{}, Errorf(CodeNotFound, "id", "matches no record visible here")
		}
		return r, err
	}
	key, err := NormalizeKey("key", sel.Key)
	if err != nil {
		return Record{}, err
	}
	query := byKey
	args := s.args(p, sql.Named("key", key), sql.Named("type", string(sel.Type)))
	if sel.Scope != nil {
		query = byKeyInScope
		args = append(args, sql.Named("scope", int(*sel.Scope)))
	}
	rs, err := queryRecords(ctx, q, query, s.b.NamedArgs(args)...)
	if err != nil {
		return Record{}, err
	}
	switch len(rs) {
	case 0:
		what := "key"
		if sel.Type != "" {
			what = string(sel.Type) + " key"
		}
		return Record{}, Errorf(CodeNotFound, "key", "%q: no %s record with this %s is visible here", key, scopeWord(sel.Scope), what)
	case 1:
		return rs[0], nil
	}
	types := make([]Type, len(rs))
	for i, r := range rs {
		types[i] = r.Type
	}
	return Record{}, Errorf(CodeConflict, "type", "key %q matches records of several types (%s); say which with type", key, joinTypes(types))
}

func scopeWord(l *scope.Level) string {
	if l == nil {
		return "effective"
	}
	return l.String()
}

// Get returns the record sel picks, in full, resolved through the scope
// chain, and counts the use (written later: see Flush). Errors:
// ErrNotFound; CodeConflict when a key alone matches several types;
// CodeInvalidArgument for a bad key.
func (s *Store) Get(ctx context.Context, p scope.Identity, sel Selector) (Record, error) {
	return retry(ctx, s, func() (Record, error) { return s.get1(ctx, p, sel) })
}

func (s *Store) get1(ctx context.Context, p scope.Identity, sel Selector) (Record, error) {
	rec, err := s.resolve(ctx, s.db, p, sel)
	if err != nil {
		return rec, err
	}
	now := s.now().UTC()
	// The stored count plus this process's uses not yet written.
	rec.UseCount += s.note([]string{rec.ID}, now)
	if rec.LastAccessedAt == nil || rec.LastAccessedAt.Before(now) {
		rec.LastAccessedAt = &now
	}
	return rec, nil
}

// Peek is Get without counting the use.
func (s *Store) Peek(ctx context.Context, p scope.Identity, sel Selector) (Record, error) {
	return retry(ctx, s, func() (Record, error) { return s.peek1(ctx, p, sel) })
}

func (s *Store) peek1(ctx context.Context, p scope.Identity, sel Selector) (Record, error) {
	rec, err := s.resolve(ctx, s.db, p, sel)
	if err != nil {
		return rec, err
	}
	s.withPending(&rec)
	return rec, nil
}

// Touch counts one use of each record in ids (they were woven into a recall
// block), written later (see Flush). Unknown ids are ignored.
func (s *Store) Touch(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	s.note(ids, s.now())
	return nil
}

// ListOptions filter a list. Zero values mean no filter.
type ListOptions struct {
	Type   Type
	Scope  *scope.Level
	Tag    string
	Limit  int // default 50, at most 500
	Cursor string
}

// List returns the effective records matching opts, without bodies, ordered
// by key then type, and a cursor for the next page ("" at the end). Errors:
// CodeInvalidArgument for a bad cursor.
func (s *Store) List(ctx context.Context, p scope.Identity, opts ListOptions) ([]Record, string, error) {
	var next string
	rs, err := retry(ctx, s, func() (rs []Record, err error) {
		rs, next, err = s.list1(ctx, p, opts)
		return rs, err
	})
	return rs, next, err
}

func (s *Store) list1(ctx context.Context, p scope.Identity, opts ListOptions) ([]Record, string, error) {
	s.flushForRead(ctx)
	limit := opts.Limit
	if limit <= 0 {
		limit = 50
	}
	if limit > 500 {
		limit = 500
	}
	where := effective
	args := s.args(p)
	if opts.Type != "" {
		where += ` AND r.type = @type`
		args = append(args, sql.Named("type", string(opts.Type)))
	}
	if opts.Scope != nil {
		where += ` AND r.scope = @scope`
		args = append(args, sql.Named("scope", int(*opts.Scope)))
	}
	if opts.Tag != "" {
		if !storableText(opts.Tag) {
			return nil, "", nil // no stored tag holds these bytes (PostgreSQL could not)
		}
		where += ` AND EXISTS (SELECT 1 FROM ` + s.jsonValues("r.tags") + ` WHERE json_each.value = @tag)`
		args = append(args, sql.Named("tag", opts.Tag))
	}
	if opts.Cursor != "" {
		key, typ, err := decodeCursor(opts.Cursor)
		if err != nil {
			return nil, "", err
		}
		where += ` AND (r.key, r.type) > (@ckey, @ctype)`
		args = append(args, sql.Named("ckey", key), sql.Named("ctype", typ))
	}
	args = append(args, sql.Named("limit", limit+1))
	// The index holds the page's order: walking it stops after the page,
	// where a sort would read every record first.
	rs, err := queryRecords(ctx, s.db, `SELECT `+colsNoBody+` FROM records r`+s.indexedBy("records_list")+` WHERE `+where+` ORDER BY r.key, r.type LIMIT @limit`, s.b.NamedArgs(args)...)
	if err != nil {
		return nil, "", fmt.Errorf("list: %w", err)
	}
	next := ""
	if len(rs) > limit {
		rs = rs[:limit]
		last := rs[limit-1]
		next = base64.RawURLEncoding.EncodeToString([]byte(last.Key + "\x00" + string(last.Type)))
	}
	return rs, next, nil
}

func decodeCursor(c string) (key, typ string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		var ok bool
		key, typ, ok = strings.Cut(string(b), "\x00")
		if ok && storableText(key) && storableText(typ) {
			return key, typ, nil
		}
	}
	return "", "", Errorf(CodeInvalidArgument, "cursor", "is not a cursor this server returned")
}

// effectiveQuery reads the effective records of type t in the weave's
// order, from an index in that order (see migration 0008), so that a limit
// stops the walk instead of sorting every record of the type. Recency is
// the later of a record's last change and last use; the weave indexes
// hold this very expression.
func (s *Store) effectiveQuery(t Type) string {
	recency := s.greatest("r.updated_at", "coalesce(r.last_accessed_at, 0)")
	index, order := "records_weave", `r.confidence DESC, r.use_count DESC, `+recency+` DESC, r.key`
	if t == Procedural {
		index, order = "records_weave_use", `r.use_count DESC, `+recency+` DESC, r.key`
	}
	return `SELECT ` + cols + ` FROM records r` + s.indexedBy(index) + ` WHERE r.type = @type AND ` + effective + ` ORDER BY ` + order
}

// Effective returns every effective record of the given types (all types when
// none), with bodies, in weave order: facts (and notes) by confidence, use
// count and recency descending, procedures by use count and recency, then
// key; recency is the later of the last change and the last use. limit > 0
// keeps only the first limit of each type.
func (s *Store) Effective(ctx context.Context, p scope.Identity, types []Type, limit int) ([]Record, error) {
	return retry(ctx, s, func() ([]Record, error) { return s.effective1(ctx, p, types, limit) })
}

func (s *Store) effective1(ctx context.Context, p scope.Identity, types []Type, limit int) ([]Record, error) {
	s.flushForRead(ctx)
	if len(types) == 0 {
		types = Types
	}
	var out []Record
	for _, t := range types {
		q := s.effectiveQuery(t)
		args := s.args(p, sql.Named("type", string(t)))
		if limit > 0 {
			q += ` LIMIT @limit`
			args = append(args, sql.Named("limit", limit))
		}
		rs, err := queryRecords(ctx, s.db, q, s.b.NamedArgs(args)...)
		if err != nil {
			return nil, fmt.Errorf("effective %s records: %w", t, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Count returns how many effective records of type t project p sees. The
// count takes a scan of every record of the type, so it is kept until a
// write changes what it depends on or a record of the type expires.
func (s *Store) Count(ctx context.Context, p scope.Identity, t Type) (int, error) {
	return retry(ctx, s, func() (int, error) { return s.count1(ctx, p, t) })
}

func (s *Store) count1(ctx context.Context, p scope.Identity, t Type) (int, error) {
	now := s.now().UnixNano()
	var gen int64
	if err := s.db.QueryRowContext(ctx, `SELECT n FROM generation WHERE id = 1`).Scan(&gen); err != nil {
		return 0, err
	}
	k := countKey{p, t}
	s.countMu.Lock()
	c, ok := s.counts[k]
	s.countMu.Unlock()
	if ok && c.gen == gen {
		// Has anything expired since? Any type will do: asking for this
		// type only would walk the type instead of the expiry index.
		var expired bool
		err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM records`+s.indexedBy("records_expiry")+`
			WHERE expires_at IS NOT NULL AND expires_at > $1 AND expires_at <= $2)`, c.at, now).Scan(&expired)
		if err != nil {
			return 0, err
		}
		if !expired {
			return c.n, nil
		}
	}
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM records r WHERE r.type = @type AND `+effective, s.b.NamedArgs(s.args(p, sql.Named("type", string(t))))...).Scan(&n)
	if err != nil {
		return 0, err
	}
	s.countMu.Lock()
	if s.counts == nil || len(s.counts) > 1000 {
		s.counts = map[countKey]count{}
	}
	s.counts[k] = count{gen: gen, at: now, n: n}
	s.countMu.Unlock()
	return n, nil
}

type countKey struct {
	p scope.Identity
	t Type
}

// count is a kept Count: the generation and time it was made at.
type count struct {
	gen, at int64
	n       int
}

// CountAll returns how many effective records project p sees.
func (s *Store) CountAll(ctx context.Context, p scope.Identity) (int, error) {
	total := 0
	for _, t := range Types {
		n, err := s.Count(ctx, p, t)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Index returns the effective records without bodies, ordered by type then
// key; limit > 0 keeps only the first limit.
func (s *Store) Index(ctx context.Context, p scope.Identity, limit int) ([]Record, error) {
	return retry(ctx, s, func() ([]Record, error) { return s.index1(ctx, p, limit) })
}

func (s *Store) index1(ctx context.Context, p scope.Identity, limit int) ([]Record, error) {
	q := `SELECT ` + colsNoBody + ` FROM records r WHERE ` + effective + ` ORDER BY r.type, r.key`
	args := s.args(p)
	if limit > 0 {
		q += ` LIMIT @limit`
		args = append(args, sql.Named("limit", limit))
	}
	return queryRecords(ctx, s.db, q, s.b.NamedArgs(args)...)
}
