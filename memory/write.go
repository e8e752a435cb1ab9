package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/secrets"
)

// Project names the project a call works in: its identity, and the markdown
// mirror that project-scoped facts and procedures are written through (nil
// for none).
type Project struct {
	ID     scope.Identity
	Mirror Mirror
	// ReadOnly lists levels this caller may read but not write (a team
	// server's system level, for all but admin tokens).
	ReadOnly []scope.Level
}

// Mirror is the markdown mirror as the store sees it. The store calls it
// inside the write transaction, so a failed file write changes nothing,
// and calls the undo a file operation returns when its transaction does
// not commit, so that a file is changed only for a change that is
// committed.
type Mirror interface {
	// Write writes rec's file atomically and reports what is on disk. last
	// is what was last imported or written there (nil: nothing); a file
	// that no longer matches it is a human's edit, never overwritten:
	// Write returns a CodeConflict *Error instead. undo (nil when nothing
	// changed) puts the file back as it was.
	Write(rec Record, last *FileState) (st FileState, undo func(), err error)
	// Remove deletes key's file; a missing file is not an error. A file
	// that does not match last is left alone with a CodeConflict *Error.
	// undo (nil when nothing changed) puts the file back.
	Remove(key string, last *FileState) (undo func(), err error)
}

// FileState is what the mirror last saw of one file.
type FileState struct {
	Stem  string
	Size  int64
	MTime int64 // Unix nanoseconds
	Hash  string
	ID    string // the record it holds
	CTime int64  // Unix nanoseconds; 0 where the platform has none
	// FileID is the id line the file carries when it is not ID: a second
	// checkout's copy of a record has an id of its own.
	FileID string
}

// Write is what a writer supplies for one record. Zero optional fields take
// their defaults: description empty, confidence 0.5 (or the existing
// record's), expiry by type.
type Write struct {
	Scope       scope.Level
	Type        Type
	Key         string
	Description string
	Body        string
	Tags        []string
	Confidence  *float64
	TTL         *time.Duration
	SessionID   string
	Source      Source
	Metadata    map[string]string
	// UseCount, when set, raises the record's use count to it, never lowers
	// it (capture counts repeated procedures this way; an import of an
	// older export keeps the uses counted since).
	UseCount *int64

	// keepExpiry sets expires_at to expiresAt instead of deriving it from TTL.
	keepExpiry bool
	expiresAt  *time.Time
}

// Patch changes some fields of an existing record; nil leaves a field alone.
type Patch struct {
	Body        *string
	Description *string
	Tags        *[]string
	Confidence  *float64
	TTL         *time.Duration
	Metadata    *map[string]string
}

// Selector picks a record by id, or by key with an optional type and scope.
// Without a scope the key is resolved through the chain (narrowest wins).
type Selector struct {
	ID    string
	Key   string
	Type  Type
	Scope *scope.Level
}

// validate normalises w in place and checks every field, secrets included.
func validate(w *Write) error {
	if w.Scope < scope.Project || w.Scope > scope.System {
		return Errorf(CodeInvalidArgument, "scope", "is unknown")
	}
	if _, err := ParseType("type", string(w.Type)); err != nil {
		return err
	}
	k, err := NormalizeKey("key", w.Key)
	if err != nil {
		return err
	}
	w.Key = k
	if w.Source == "" {
		w.Source = FromTool
	}
	if w.Source != FromTool && w.Source != FromMarkdown && w.Source != FromCapture && w.Source != FromCLI && w.Source != FromSync {
		return Errorf(CodeInvalidArgument, "source", "is not tool, markdown, capture, cli or sync")
	}
	if w.UseCount != nil && (*w.UseCount < 0 || *w.UseCount > MaxUseCount) {
		return Errorf(CodeInvalidArgument, "use_count", "must be between 0 and %d", MaxUseCount)
	}
	w.Body = CanonBody(w.Body)
	if err := checkBody(w.Body); err != nil {
		return err
	}
	if w.Description, err = checkDescription(w.Description); err != nil {
		return err
	}
	if w.Tags, err = checkTags(w.Tags); err != nil {
		return err
	}
	if w.Confidence != nil {
		if err := checkConfidence(*w.Confidence); err != nil {
			return err
		}
	}
	if w.TTL != nil && (*w.TTL <= 0 || *w.TTL > MaxTTL) {
		return Errorf(CodeInvalidArgument, "ttl_seconds", "must be between 1 and %d (100 years)", int64(MaxTTL/time.Second))
	}
	if err := checkMetadata(w.Metadata); err != nil {
		return err
	}
	if len(w.SessionID) > 200 || !utf8.ValidString(w.SessionID) || strings.IndexFunc(w.SessionID, unicode.IsControl) >= 0 {
		return Errorf(CodeInvalidArgument, "session_id", "must be one line of valid UTF-8, at most 200 bytes")
	}
	return ScanWrite(w)
}

func checkBody(b string) error {
	if strings.TrimSpace(b) == "" {
		return Errorf(CodeInvalidArgument, "body", "is empty")
	}
	if len(b) > MaxBodyBytes {
		return Errorf(CodeTooLarge, "body", "is %d bytes; the limit is %d (64 KiB)", len(b), MaxBodyBytes)
	}
	if !utf8.ValidString(b) {
		return Errorf(CodeInvalidArgument, "body", "is not valid UTF-8")
	}
	if strings.ContainsRune(b, 0) {
		return Errorf(CodeInvalidArgument, "body", "contains NUL bytes")
	}
	return nil
}

// CanonBody is a body as the store keeps it and a markdown file holds it:
// LF line endings, no leading blank lines, no trailing white space. Every
// writer stores this form, so a record and its file always agree.
func CanonBody(s string) string {
	s = UnixNewlines(s)
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 || strings.Trim(s[:i], " \t\r") != "" {
			break
		}
		s = s[i+1:]
	}
	return strings.TrimRight(s, " \t\r\n")
}

// UnixNewlines ends every line with a bare LF: the CRs just before each LF
// go ("\r\n" and "\r\r\n" alike), so a second pass changes nothing. A CR
// anywhere else stays.
func UnixNewlines(s string) string {
	i := strings.Index(s, "\r\n")
	if i < 0 {
		return s
	}
	for i > 0 && s[i-1] == '\r' {
		i--
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for i < len(s) {
		if s[i] != '\r' {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '\r' {
			j++
		}
		if j == len(s) || s[j] != '\n' {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

func checkDescription(d string) (string, error) {
	d = strings.Join(strings.Fields(d), " ")
	if len(d) > MaxDescriptionLen {
		return "", Errorf(CodeTooLarge, "description", "is %d bytes; the limit is %d", len(d), MaxDescriptionLen)
	}
	if !utf8.ValidString(d) {
		return "", Errorf(CodeInvalidArgument, "description", "is not valid UTF-8")
	}
	if strings.ContainsRune(d, 0) {
		return "", Errorf(CodeInvalidArgument, "description", "contains NUL bytes")
	}
	return d, nil
}

func checkTags(tags []string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, Errorf(CodeTooLarge, "tags", "has %d tags; the limit is %d", len(tags), MaxTags)
	}
	out := make([]string, 0, len(tags))
	for i, t := range tags {
		t = strings.TrimSpace(t)
		if t == "" {
			return nil, Errorf(CodeInvalidArgument, fmt.Sprintf("tags[%d]", i), "is empty")
		}
		if len(t) > MaxTagLen || !utf8.ValidString(t) || strings.IndexFunc(t, unicode.IsControl) >= 0 {
			return nil, Errorf(CodeInvalidArgument, fmt.Sprintf("tags[%d]", i), "must be one line of valid UTF-8, at most %d bytes", MaxTagLen)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func checkConfidence(c float64) error {
	if math.IsNaN(c) || c < 0 || c > 1 {
		return Errorf(CodeInvalidArgument, "confidence", "must be between 0 and 1")
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > MaxMetadata {
		return Errorf(CodeTooLarge, "metadata", "has %d entries; the limit is %d", len(m), MaxMetadata)
	}
	n := 0
	for k, v := range m {
		if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) || strings.IndexFunc(k, unicode.IsControl) >= 0 || strings.ContainsRune(v, 0) {
			return Errorf(CodeInvalidArgument, "metadata", "keys must be non-empty one-line text, and keys and values valid UTF-8 without NUL")
		}
		n += len(k) + len(v)
	}
	if n > MaxMetadataBytes {
		return Errorf(CodeTooLarge, "metadata", "is %d bytes; the limit is %d", n, MaxMetadataBytes)
	}
	return nil
}

// ScanField reports a secret in value as a secret_rejected *Error naming the
// field and the rule, never the value.
func ScanField(field, value string) error {
	if f, ok := secrets.Scan(value); ok {
		return Errorf(CodeSecretRejected, field, "looks like a secret (rule %s: %s); it was not stored", f.Rule, f.Description)
	}
	return nil
}

// ScanWrite reports a secret in any field of w as ScanField does.
func ScanWrite(w *Write) error {
	if err := ScanField("key", w.Key); err != nil {
		return err
	}
	if err := ScanField("description", w.Description); err != nil {
		return err
	}
	if err := ScanField("body", w.Body); err != nil {
		return err
	}
	for i, t := range w.Tags {
		if err := ScanField(fmt.Sprintf("tags[%d]", i), t); err != nil {
			return err
		}
	}
	if err := scanMetadata(w.Metadata); err != nil {
		return err
	}
	return ScanKey("session_id", w.SessionID)
}

func scanMetadata(m map[string]string) error {
	for _, k := range sortedKeys(m) {
		if err := ScanKey("metadata", k); err != nil {
			return err
		}
		if err := ScanField("metadata."+safeField(k), m[k]); err != nil {
			return err
		}
	}
	return nil
}

// safeField is a metadata key fit to appear in an error: it was scanned
// already, so only its length is bounded.
func safeField(k string) string { return clip(strconv.QuoteToASCII(k), 40) }

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Put writes a record, replacing the content of one with the same scope,
// type and key (its id, creation time and use count stay). It returns the
// stored record and whether it was new. A write that changes nothing leaves
// the record, and its markdown file, exactly as they were.
//
// Errors: *Error with CodeInvalidArgument, CodeTooLarge or CodeSecretRejected
// for bad input; CodeConflict when a project key is held by the other
// mirrored type.
func (s *Store) Put(ctx context.Context, p Project, w Write) (Record, bool, error) {
	if err := validate(&w); err != nil {
		return Record{}, false, err
	}
	var rec Record
	var created bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := p.writable(w.Scope); err != nil {
			return err
		}
		var err error
		// The transaction is this put's alone: a failure rolls it all
		// back, with no savepoint needed.
		rec, created, err = s.putOnce(ctx, tx, p, w, "")
		return err
	})
	return rec, created, err
}

// put is the one write path: every writer ends here. id, when set, is the id
// a new record takes (the markdown mirror keeps ids stable across stores).
// A put that fails changes nothing, even in a transaction that goes on (a
// capture refuses one item and stores the rest): its markdown file may
// refuse it after the row was written.
func (s *Store) put(ctx context.Context, tx *sql.Tx, p Project, w Write, id string) (Record, bool, error) {
	if err := p.writable(w.Scope); err != nil {
		return Record{}, false, err
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT put`); err != nil {
		return Record{}, false, err
	}
	rec, created, err := s.putOnce(ctx, tx, p, w, id)
	if err != nil {
		if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO put`); rerr != nil {
			return Record{}, false, errors.Join(err, rerr)
		}
	}
	if _, rerr := tx.ExecContext(ctx, `RELEASE put`); rerr != nil && err == nil {
		return Record{}, false, rerr
	}
	return rec, created, err
}

func (s *Store) putOnce(ctx context.Context, tx *sql.Tx, p Project, w Write, id string) (Record, bool, error) {
	now := s.now().UTC()
	b := bucket(string(p.ID), int(w.Scope))
	old, exists, err := s.sameName(ctx, tx, b, w)
	if err != nil {
		return Record{}, false, err
	}

	rec := Record{
		Scope: w.Scope, Type: w.Type, Key: w.Key, Description: w.Description,
		Body: w.Body, Tags: w.Tags, Confidence: 0.5, SessionID: w.SessionID,
		Source: w.Source, Metadata: w.Metadata, CreatedAt: now, UpdatedAt: now,
	}
	if exists {
		rec.ID, rec.CreatedAt, rec.UseCount, rec.LastAccessedAt = old.ID, old.CreatedAt, old.UseCount, old.LastAccessedAt
		rec.Confidence = old.Confidence
		if rec.SessionID == "" {
			rec.SessionID = old.SessionID
		}
	} else if id != "" {
		rec.ID = id
	} else {
		rec.ID = s.newID()
	}
	if w.Confidence != nil {
		rec.Confidence = *w.Confidence
	}
	if w.UseCount != nil {
		rec.UseCount = max(rec.UseCount, *w.UseCount)
	}
	ttl := DefaultTTL(w.Type)
	if w.TTL != nil {
		ttl = *w.TTL
	}
	if w.keepExpiry {
		rec.ExpiresAt = w.expiresAt
	} else if ttl > 0 {
		t := now.Add(ttl)
		rec.ExpiresAt = &t
	}
	if exists && sameContent(old, rec) {
		// Nothing a reader or a file would see has changed: keep updated_at
		// (so the file stays byte-identical) and refresh only the expiry.
		rec.UpdatedAt = old.UpdatedAt
		if _, err := tx.ExecContext(ctx, `UPDATE records SET expires_at = $1, use_count = $2 WHERE id = $3`, nanos(rec.ExpiresAt), rec.UseCount, rec.ID); err != nil {
			return Record{}, false, err
		}
		if err := s.writeFile(ctx, tx, p, rec, false); err != nil {
			return Record{}, false, err
		}
		return rec, false, nil
	}
	mode := insertRow
	if exists {
		mode = updateContent // found under its name (sameName)
	}
	if err := s.store(ctx, tx, b, rec, mode); err != nil {
		return Record{}, false, err
	}
	if err := s.writeFile(ctx, tx, p, rec, true); err != nil {
		return Record{}, false, err
	}
	return rec, !exists, nil
}

// sameName returns the record w would replace, if there is one. A project
// fact and a project procedure share the markdown file of their key, so
// for either it is one query for both types: a record of the other type
// under the key is a conflict.
func (s *Store) sameName(ctx context.Context, tx *sql.Tx, b string, w Write) (Record, bool, error) {
	if w.Scope != scope.Project || (w.Type != Semantic && w.Type != Procedural) {
		old, err := getOne(ctx, tx, `WHERE project = $1 AND scope = $2 AND type = $3 AND key = $4`, b, int(w.Scope), string(w.Type), w.Key)
		if errors.Is(err, ErrNotFound) {
			return Record{}, false, nil
		}
		return old, err == nil, err
	}
	other := Semantic
	if w.Type == Semantic {
		other = Procedural
	}
	rows, err := queryRecords(ctx, tx, `SELECT `+cols+` FROM records r WHERE project = $1 AND scope = $2 AND type IN ($3, $4) AND key = $5`,
		b, int(w.Scope), string(w.Type), string(other), w.Key)
	if err != nil {
		return Record{}, false, err
	}
	var old Record
	exists := false
	for _, r := range rows {
		if r.Type == other {
			return Record{}, false, Errorf(CodeConflict, "key", "%q is already a project %s record; its markdown file would clash (choose another key or delete that record)", w.Key, other)
		}
		old, exists = r, true
	}
	return old, exists, nil
}

// storeMode is what store does with a record's row.
type storeMode int

const (
	insertRow     storeMode = iota // a new record
	updateContent                  // the record found under rec's name, which stays
	updateAll                      // the record of rec's id, perhaps renamed or retyped
)

// store inserts or updates rec's row in bucket b. Neither statement
// returns the row: a RETURNING clause makes SQLite gather its rows apart
// and database/sql watch them from a goroutine of their own. An update of
// content alone leaves the columns of the name, and so the indexes that
// hold only them, as they are.
func (s *Store) store(ctx context.Context, tx *sql.Tx, b string, rec Record, mode storeMode) error {
	tags, _ := json.Marshal(nonNil(rec.Tags))
	meta, _ := json.Marshal(nonNilMap(rec.Metadata))
	var res sql.Result
	var err error
	switch mode {
	case insertRow:
		_, err = tx.ExecContext(ctx, `INSERT INTO records (id, project, scope, type, key, description, body, tags, confidence, use_count,
			last_accessed_at, created_at, updated_at, expires_at, session_id, source, metadata)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
			rec.ID, b, int(rec.Scope), string(rec.Type), rec.Key, rec.Description, rec.Body, string(tags), rec.Confidence, rec.UseCount,
			nanos(rec.LastAccessedAt), rec.CreatedAt.UnixNano(), rec.UpdatedAt.UnixNano(), nanos(rec.ExpiresAt), rec.SessionID, string(rec.Source), string(meta))
		if err != nil {
			return fmt.Errorf("insert %s: %w", rec.Key, err)
		}
		return nil
	case updateContent:
		res, err = tx.ExecContext(ctx, `UPDATE records SET description = $1, body = $2, tags = $3, confidence = $4,
			use_count = $5, updated_at = $6, expires_at = $7, session_id = $8, source = $9, metadata = $10 WHERE id = $11`,
			rec.Description, rec.Body, string(tags), rec.Confidence,
			rec.UseCount, rec.UpdatedAt.UnixNano(), nanos(rec.ExpiresAt), rec.SessionID, string(rec.Source), string(meta), rec.ID)
	default:
		res, err = tx.ExecContext(ctx, `UPDATE records SET project = $1, scope = $2, type = $3, key = $4, description = $5, body = $6, tags = $7, confidence = $8,
			use_count = $9, updated_at = $10, expires_at = $11, session_id = $12, source = $13, metadata = $14 WHERE id = $15`,
			b, int(rec.Scope), string(rec.Type), rec.Key, rec.Description, rec.Body, string(tags), rec.Confidence,
			rec.UseCount, rec.UpdatedAt.UnixNano(), nanos(rec.ExpiresAt), rec.SessionID, string(rec.Source), string(meta), rec.ID)
	}
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n == 0 {
		err = sql.ErrNoRows // read in this transaction, so never
	}
	if err != nil {
		return fmt.Errorf("update %s: %w", rec.Key, err)
	}
	return nil
}

// writeFile mirrors rec when it belongs in the mirror. With force false it
// only makes sure a file exists (a no-op write must not touch the file).
func (s *Store) writeFile(ctx context.Context, tx *sql.Tx, p Project, rec Record, force bool) error {
	if p.Mirror == nil || !rec.Mirrored() {
		return nil
	}
	last, err := fileState(ctx, tx, p.ID, rec.Key)
	if err != nil {
		return err
	}
	if !force && last != nil {
		return nil
	}
	st, undo, err := p.Mirror.Write(rec, last)
	if err != nil {
		return mirrorError("write", rec.Key, err)
	}
	st.ID = rec.ID
	if err := setFileState(ctx, tx, p.ID, st); err != nil {
		undoFile(undo) // put's savepoint drops the row: so goes the file
		return err
	}
	s.undoOnRollback(undo)
	return nil
}

func sameContent(a, b Record) bool {
	return a.Scope == b.Scope && a.Type == b.Type && a.Key == b.Key && a.Description == b.Description &&
		a.Body == b.Body && slices.Equal(nonNil(a.Tags), nonNil(b.Tags)) && a.Confidence == b.Confidence &&
		a.SessionID == b.SessionID && mapsEqual(a.Metadata, b.Metadata)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Update changes the fields of patch on the record sel picks. It returns the
// updated record. Errors: ErrNotFound when nothing matches; CodeConflict when
// a key alone matches several types; the validation errors of Put.
func (s *Store) Update(ctx context.Context, p Project, sel Selector, patch Patch) (Record, error) {
	var rec Record
	err := s.tx(ctx, func(tx *sql.Tx) error {
		old, err := s.resolve(ctx, tx, p.ID, sel)
		if err != nil {
			return err
		}
		w := Write{
			Scope: old.Scope, Type: old.Type, Key: old.Key, Description: old.Description, Body: old.Body,
			Tags: old.Tags, Confidence: &old.Confidence, SessionID: old.SessionID, Source: old.Source, Metadata: old.Metadata,
		}
		if patch.Body != nil {
			w.Body = *patch.Body
		}
		if patch.Description != nil {
			w.Description = *patch.Description
		}
		if patch.Tags != nil {
			w.Tags = *patch.Tags
		}
		if patch.Confidence != nil {
			w.Confidence = patch.Confidence
		}
		if patch.Metadata != nil {
			w.Metadata = *patch.Metadata
		}
		if patch.TTL != nil {
			w.TTL = patch.TTL
		} else {
			// Keep the record's expiry where it was.
			w.keepExpiry, w.expiresAt = true, old.ExpiresAt
		}
		if err := validate(&w); err != nil {
			return err
		}
		if err := p.writable(w.Scope); err != nil {
			return err
		}
		// The transaction is this update's alone: no savepoint needed.
		rec, _, err = s.putOnce(ctx, tx, p, w, "")
		return err
	})
	return rec, err
}

// Delete removes the record sel picks (the narrowest when no scope is
// given, so a broader one shows again) and its markdown file. Errors:
// ErrNotFound, or CodeConflict when a key alone matches several types.
func (s *Store) Delete(ctx context.Context, p Project, sel Selector) (Record, error) {
	var rec Record
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		rec, err = s.resolve(ctx, tx, p.ID, sel)
		if err != nil {
			return err
		}
		if err := p.writable(rec.Scope); err != nil {
			return err
		}
		return s.remove(ctx, tx, p, rec, true)
	})
	return rec, err
}

func (s *Store) remove(ctx context.Context, tx *sql.Tx, p Project, rec Record, removeFile bool) (err error) {
	// The file first: one edited by hand since it was last written keeps
	// its record too.
	if removeFile && p.Mirror != nil && rec.Mirrored() {
		last, ferr := fileState(ctx, tx, p.ID, rec.Key)
		if ferr != nil {
			return ferr
		}
		undo, ferr := p.Mirror.Remove(rec.Key, last)
		if ferr != nil {
			return mirrorError("remove", rec.Key, ferr)
		}
		defer func() {
			if err != nil {
				undoFile(undo) // the record stays: so does its file
			} else {
				s.undoOnRollback(undo)
			}
		}()
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM records WHERE id = $1`, rec.ID); err != nil {
		return err
	}
	if !rec.Mirrored() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_files WHERE project = $1 AND stem = $2`, string(p.ID), rec.Key); err != nil {
		return err
	}
	return nil
}

// tx runs fn in an immediate transaction, retrying while another process
// holds the write lock beyond the busy timeout.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.tx1(ctx, fn)
		if err == nil || !s.b.Retryable(err) || attempt >= 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
}

func (s *Store) tx1(ctx context.Context, fn func(*sql.Tx) error) error {
	select {
	case s.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writing }()
	tx, end, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	// Deferred, so that a panic in fn does not leave the connection
	// holding the write lock; after Commit it does nothing. Files changed
	// for a transaction that does not commit are put back first, under
	// the lock still.
	defer end(false)
	defer s.undoFiles()
	// Uses counted since the last write go in with this one: the write
	// lock is held already, and fn may read the counts.
	uses := s.take()
	done := false
	defer func() {
		if !done {
			s.giveBack(uses)
		}
	}()
	if err := s.writeUses(ctx, tx, uses); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := end(true); err != nil {
		if s.b.Uncertain(err) {
			// It may have committed (PostgreSQL, the server unreachable
			// to ask): undoing its files would lose a record that is
			// saved, so they stay, and a sync imports them if it is not;
			// its uses are not counted a second time.
			s.fileUndo = nil
			done = true
		}
		return err
	}
	s.fileUndo = nil
	done = true
	if s.afterCommit != nil {
		s.afterCommit()
	}
	return nil
}
