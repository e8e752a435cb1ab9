package semantic

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"

	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/secrets"
)

// Embedder turns texts into vectors, one per text and in order, all of
// one length. memory/embed's Client is one.
//
// An error whose chain holds a value with a method Rejected() bool that
// returns true says the endpoint refused the texts themselves (too long
// for the model, say): EmbedPending then tries fewer and shorter texts.
// One with a method InputFailure() bool that returns true says the
// endpoint answered but failed, which one text can cause: EmbedPending
// then tries the texts one by one. Any other error means the endpoint
// cannot be used now.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// MaxEmbedText bounds the text of one record sent to be embedded, in
// bytes: its key, description, tags and the start of its body.
const MaxEmbedText = 4000

// minEmbedText is as short as a text refused for its length is cut to.
const minEmbedText = 256

// maxTries is how many refusals a record meets before it is left out
// until the next QueueMissing.
const maxTries = 3

// EmbedResult is what one EmbedPending round did.
type EmbedResult struct {
	Embedded int // records given a vector
	Skipped  int // records left without one: the endpoint refused their text, or it looked like a secret
	Dropped  int // queued records that are gone, expired or changed since; the last are queued again
}

// EmbedText is the text a record is embedded by: its key as words, its
// description, its tags and its body, cut to MaxEmbedText bytes.
func EmbedText(r memory.Record) string {
	var b strings.Builder
	b.WriteString(strings.NewReplacer("-", " ", "_", " ", ".", " ").Replace(r.Key))
	if r.Description != "" {
		b.WriteString("\n" + r.Description)
	}
	if len(r.Tags) > 0 {
		b.WriteString("\n" + strings.Join(r.Tags, ", "))
	}
	if r.Body != "" {
		b.WriteString("\n\n" + r.Body)
	}
	return cutText(b.String(), MaxEmbedText)
}

// cutText shortens s to at most n bytes on a rune boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

type pending struct {
	seq, rid int64
	tries    int // refusals so far
	text     string
	vec      []float32
	skip     bool // refused by the endpoint: count a try
	drop     bool // nothing to embed: leave the queue
}

// notEmbedded holds for a queue row q whose record has no vector of the
// model the parameter named by model holds.
func notEmbedded(model string) string {
	return `NOT EXISTS (SELECT 1 FROM embed_vectors v WHERE v.rid = q.rid AND v.model = ` + model + `)`
}

// EmbedPending embeds up to n queued records with e and keeps their
// vectors under model. Only what the store holds is sent, and each text is
// scanned for secrets once more on its way out: one that matches is never
// sent. A record changed while it was being embedded keeps its place in
// the queue. Errors: the endpoint's, when it cannot be used now (the
// vectors it gave before failing are kept), and the database's.
func (s *Index) EmbedPending(ctx context.Context, model string, e Embedder, n int) (EmbedResult, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return EmbedResult{}, err
	}
	var res EmbedResult
	if n <= 0 {
		n = 32
	}
	// A record queued with a vector of model already is another model's
	// work (a server sharing the database with another model queued it):
	// it stays queued for that server.
	rows, err := s.st.DB().QueryContext(ctx, `SELECT q.seq, q.rid, q.tries, r.key, r.description, r.body, r.tags, r.expires_at
		FROM embed_queue q LEFT JOIN records r ON r.rowid = q.rid WHERE q.tries < $1 AND `+notEmbedded("$2")+`
		ORDER BY q.seq LIMIT $3`, maxTries, model, n)
	if err != nil {
		return res, fmt.Errorf("read embedding queue: %w", err)
	}
	var items []*pending
	now := s.st.Now().UnixNano()
	for rows.Next() {
		var it pending
		var key, desc, body, tags sql.NullString
		var exp sql.NullInt64
		if err := rows.Scan(&it.seq, &it.rid, &it.tries, &key, &desc, &body, &tags, &exp); err != nil {
			rows.Close()
			return res, fmt.Errorf("read embedding queue: %w", err)
		}
		items = append(items, &it)
		if !key.Valid || exp.Valid && exp.Int64 <= now {
			it.drop = true
			continue
		}
		r := memory.Record{Key: key.String, Description: desc.String, Body: body.String}
		if err := json.Unmarshal([]byte(tags.String), &r.Tags); err != nil {
			it.drop = true
			continue
		}
		it.text = EmbedText(r)
		if leaks(r, it.text) {
			it.drop, it.skip = true, true
			continue
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("read embedding queue: %w", err)
	}
	if len(items) == 0 {
		return res, nil
	}
	var send []*pending
	for _, it := range items {
		if !it.drop {
			send = append(send, it)
		}
	}
	callErr := embedSome(ctx, e, send)
	if callErr != nil && inputFailure(callErr) {
		if len(send) > 1 {
			callErr = embedAlone(ctx, e, send)
		} else if send[0].tries > 0 {
			// It failed alone before, while others did not.
			send[0].skip, callErr = true, nil
		}
	}
	if err := s.keepVectors(ctx, model, items, &res); err != nil {
		return res, err
	}
	return res, callErr
}

// leaks reports whether r's text to embed, or its fields as stored (the
// text spells the key's separators as spaces, which can break a token
// apart), look like they hold a secret.
func leaks(r memory.Record, text string) bool {
	for _, f := range append([]string{text, r.Key, r.Description, r.Body}, r.Tags...) {
		if _, found := secrets.Scan(f); found {
			return true
		}
	}
	return false
}

// embedSome fills in the vectors of items. Texts the endpoint refuses are
// tried in smaller groups, then alone and shorter, and marked skip when
// even the shortest is refused. It stops at the first other error.
func embedSome(ctx context.Context, e Embedder, items []*pending) error {
	if len(items) == 0 {
		return nil
	}
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.text
	}
	vs, err := e.Embed(ctx, texts)
	if err == nil && len(vs) != len(items) {
		err = fmt.Errorf("embeddings endpoint gave %d vectors for %d texts", len(vs), len(items))
	}
	if err == nil {
		for i, it := range items {
			it.vec = vs[i]
		}
		return nil
	}
	if !rejected(err) {
		return err
	}
	if len(items) > 1 {
		half := len(items) / 2
		if err := embedSome(ctx, e, items[:half]); err != nil {
			return err
		}
		return embedSome(ctx, e, items[half:])
	}
	it := items[0]
	if len(it.text) <= minEmbedText {
		it.skip = true
		return nil
	}
	it.text = cutText(it.text, max(minEmbedText, len(it.text)/2))
	// A cut can end a long harmless token at exactly a secret's length.
	if _, found := secrets.Scan(it.text); found {
		it.skip = true
		return nil
	}
	return embedSome(ctx, e, items)
}

// embedAlone embeds the items still without a vector one by one, after a
// request holding them failed in a way one text can cause. When some
// succeed, those that fail alone are marked skip (refused); when none
// does, the endpoint is failing whatever it is sent, and its first error
// is returned.
func embedAlone(ctx context.Context, e Embedder, items []*pending) error {
	var failed []*pending
	var first error
	for _, it := range items {
		if it.vec != nil || it.skip {
			continue
		}
		err := embedSome(ctx, e, []*pending{it})
		if err == nil {
			continue
		}
		if !inputFailure(err) {
			return err
		}
		failed = append(failed, it)
		if first == nil {
			first = err
		}
	}
	if slices.IndexFunc(items, func(it *pending) bool { return it.vec != nil }) < 0 && len(failed) > 0 {
		return first
	}
	for _, it := range failed {
		it.skip = true
	}
	return nil
}

func inputFailure(err error) bool {
	var r interface{ InputFailure() bool }
	return errors.As(err, &r) && r.InputFailure()
}

func rejected(err error) bool {
	var r interface{ Rejected() bool }
	return errors.As(err, &r) && r.Rejected()
}

// keepVectors stores the vectors of items whose queue rows are unchanged
// and takes those rows off the queue.
func (s *Index) keepVectors(ctx context.Context, model string, items []*pending, res *EmbedResult) error {
	return s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		*res = EmbedResult{}
		checked := map[int]bool{} // lengths of vector known to be the model's
		for _, it := range items {
			switch {
			case it.drop && it.skip: // a secret: never sent, never queued again until it changes
				if _, err := tx.ExecContext(ctx, `DELETE FROM embed_queue WHERE seq = $1`, it.seq); err != nil {
					return err
				}
				res.Skipped++
			case it.drop:
				if _, err := tx.ExecContext(ctx, `DELETE FROM embed_queue WHERE seq = $1`, it.seq); err != nil {
					return err
				}
				res.Dropped++
			case it.skip:
				if _, err := tx.ExecContext(ctx, `UPDATE embed_queue SET tries = tries + 1 WHERE seq = $1`, it.seq); err != nil {
					return err
				}
				res.Skipped++
			case it.vec != nil:
				r, err := tx.ExecContext(ctx, `DELETE FROM embed_queue WHERE seq = $1`, it.seq)
				if err != nil {
					return err
				}
				if n, _ := r.RowsAffected(); n == 0 {
					res.Dropped++ // changed (or deleted) while embedding
					continue
				}
				if !checked[len(it.vec)] {
					if err := checkDims(ctx, tx, model, len(it.vec)); err != nil {
						return err
					}
					checked[len(it.vec)] = true
				}
				if err := replaceVector(ctx, tx, model, it.rid, it.vec); err != nil {
					return err
				}
				res.Embedded++
			}
		}
		return nil
	})
}

// checkDims makes way for model's vectors of dims dimensions. A model
// whose vectors change length has been replaced under the same name: its
// vectors of another length are dropped and their records queued again.
func checkDims(ctx context.Context, tx *sql.Tx, model string, dims int) error {
	var lo, hi int
	err := tx.QueryRowContext(ctx, `SELECT (SELECT dims FROM embed_vectors WHERE model = $1 ORDER BY dims LIMIT 1),
		(SELECT dims FROM embed_vectors WHERE model = $1 ORDER BY dims DESC LIMIT 1)`, model).Scan(&nullInt{&lo}, &nullInt{&hi})
	if err != nil || (lo == 0 || lo == dims) && (hi == 0 || hi == dims) {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO embed_queue (rid) SELECT rid FROM embed_vectors WHERE model = $1 AND dims <> $2
		AND rid NOT IN (SELECT rid FROM embed_queue)`, model, dims); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM embed_vectors WHERE model = $1 AND dims <> $2`, model, dims)
	return err
}

// nullInt scans a NULL as 0.
type nullInt struct{ p *int }

func (n *nullInt) Scan(v any) error {
	var x sql.NullInt64
	if err := x.Scan(v); err != nil {
		return err
	}
	*n.p = int(x.Int64)
	return nil
}

// replaceVector stores rid's vector of model.
func replaceVector(ctx context.Context, tx *sql.Tx, model string, rid int64, v []float32) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM embed_vectors WHERE rid = $1 AND model = $2`, rid, model); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO embed_vectors (rid, model, dims, vec) VALUES ($1, $2, $3, $4)`, rid, model, len(v), encodeVector(v))
	return err
}

// encodeVector is v at unit length as little-endian float32s.
func encodeVector(v []float32) []byte {
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	norm = math.Sqrt(norm)
	b := make([]byte, 4*len(v))
	for i, x := range v {
		if norm > 0 {
			x = float32(float64(x) / norm)
		}
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// wantEmbeddings has the database queue records for embedding from now
// on, the first time it is asked about embeddings: until then writes
// queue nothing (see migrations/0020_embed_on_demand.sql), and now every
// record with no vector that is not queued yet is, in the order they were
// last changed, as the queue would have held them. Another process's
// write cannot slip between the two: both take the write lock. PostgreSQL
// queues always.
func (s *Index) wantEmbeddings(ctx context.Context) error {
	if s.st.Backend() == "postgres" || s.wanted.Load() {
		return nil
	}
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO embed_wanted (id) VALUES (1) ON CONFLICT DO NOTHING`)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO embed_queue (rid) SELECT r.rowid FROM records r
			WHERE NOT EXISTS (SELECT 1 FROM embed_queue q WHERE q.rid = r.rowid)
			AND NOT EXISTS (SELECT 1 FROM embed_vectors v WHERE v.rid = r.rowid)
			ORDER BY r.updated_at, r.rowid`)
		return err
	})
	if err != nil {
		return fmt.Errorf("queue records to embed: %w", err)
	}
	s.wanted.Store(true)
	return nil
}

// QueueMissing queues every record with no vector of model that is not
// queued yet (all of them, after a change of model), and gives records
// refused before another chance. It returns how many records are queued.
func (s *Index) QueueMissing(ctx context.Context, model string) (int, error) {
	return s.queueMissing(ctx, model, true)
}

// QueueOthersEmbedded queues the records with a vector of another model
// but none of model, as a server sharing the database with another model
// leaves them: it embeds what is stored while it holds the queue, with its
// model only. Records refused before keep their count of refusals. It
// returns how many records are queued; with no other model's vectors in
// the store it reads nothing and returns 0.
func (s *Index) QueueOthersEmbedded(ctx context.Context, model string) (int, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return 0, err
	}
	var others bool
	if err := s.st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM embed_vectors WHERE model <> $1)`, model).Scan(&others); err != nil {
		return 0, fmt.Errorf("queue records to embed: %w", err)
	}
	if !others {
		return 0, nil
	}
	return s.queueMissing(ctx, model, false)
}

func (s *Index) queueMissing(ctx context.Context, model string, retry bool) (int, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return 0, err
	}
	var n int
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO embed_queue (rid) SELECT r.rowid FROM records r
			WHERE NOT EXISTS (SELECT 1 FROM embed_vectors v WHERE v.rid = r.rowid AND v.model = $1)
			AND NOT EXISTS (SELECT 1 FROM embed_queue q WHERE q.rid = r.rowid) ORDER BY r.rowid`, model); err != nil {
			return err
		}
		if retry {
			if _, err := tx.ExecContext(ctx, `UPDATE embed_queue SET tries = 0 WHERE tries > 0`); err != nil {
				return err
			}
		}
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM embed_queue q WHERE `+notEmbedded("$1"), model).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("queue records to embed: %w", err)
	}
	return n, nil
}

// EmbedStatus is how far the embedding of the store has come.
type EmbedStatus struct {
	Model   string         `json:"model"`
	Vectors int            `json:"vectors"` // records with a vector of Model
	Dims    int            `json:"dims,omitempty"`
	Pending int            `json:"pending"` // queued, still to try
	Refused int            `json:"refused"` // queued, refused by the endpoint
	Others  map[string]int `json:"other_models,omitempty"`
}

// EmbedStatus counts the vectors of model and of other models, and the
// records waiting.
func (s *Index) EmbedStatus(ctx context.Context, model string) (EmbedStatus, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return EmbedStatus{}, err
	}
	st := EmbedStatus{Model: model, Others: map[string]int{}}
	rows, err := s.st.DB().QueryContext(ctx, `SELECT model, max(dims), count(*) FROM embed_vectors GROUP BY model`)
	if err != nil {
		return st, fmt.Errorf("count vectors: %w", err)
	}
	for rows.Next() {
		var m string
		var dims, n int
		if err := rows.Scan(&m, &dims, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("count vectors: %w", err)
		}
		if m == model {
			st.Vectors, st.Dims = n, dims
		} else {
			st.Others[m] = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("count vectors: %w", err)
	}
	if len(st.Others) == 0 {
		st.Others = nil
	}
	err = s.st.DB().QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE tries < $1), count(*) FILTER (WHERE tries >= $2) FROM embed_queue`, maxTries, maxTries).Scan(&st.Pending, &st.Refused)
	if err != nil {
		return st, fmt.Errorf("count queued records: %w", err)
	}
	return st, nil
}

// PruneVectors deletes the vectors of every model but keep, and reports
// how many.
func (s *Index) PruneVectors(ctx context.Context, keep string) (int64, error) {
	var n int64
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM embed_vectors WHERE model <> $1`, keep)
		if err != nil {
			return err
		}
		n, _ = r.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune vectors: %w", err)
	}
	return n, nil
}

// EmbedQueued counts the records waiting to be embedded with model,
// leaving out those the endpoint refused.
func (s *Index) EmbedQueued(ctx context.Context, model string) (int, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return 0, err
	}
	var n int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM embed_queue q WHERE tries < $1 AND `+notEmbedded("$2"), maxTries, model).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued records: %w", err)
	}
	return n, nil
}

// LeaseEmbedding makes holder the process that embeds the queue for d,
// unless another holds a lease that has not run out, and reports whether
// holder has it. Holding it again renews it.
func (s *Index) LeaseEmbedding(ctx context.Context, holder string, d time.Duration) (bool, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return false, err
	}
	now := s.st.Now()
	var got string
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO embed_lease (id, holder, until) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, until = excluded.until
			WHERE embed_lease.until <= $3 OR embed_lease.holder = excluded.holder`, holder, now.Add(d).UnixNano(), now.UnixNano()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT holder FROM embed_lease WHERE id = 1`).Scan(&got)
	})
	if err != nil {
		return false, fmt.Errorf("lease the embedding queue: %w", err)
	}
	return got == holder, nil
}

// ReleaseEmbedding gives up holder's lease, so another process can take
// over at once.
func (s *Index) ReleaseEmbedding(ctx context.Context, holder string) error {
	return s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE embed_lease SET until = 0 WHERE id = 1 AND holder = $1`, holder)
		return err
	})
}

// EmbedWaiting counts the records p sees that wait to be embedded with
// model, leaving out those the endpoint refused. Records p cannot see
// are not counted: on a team server their number is not the caller's
// business.
func (s *Index) EmbedWaiting(ctx context.Context, p scope.Identity, model string) (int, error) {
	if err := s.wantEmbeddings(ctx); err != nil {
		return 0, err
	}
	var n int
	visible, args := s.st.Visible(p, sql.Named("tries", maxTries), sql.Named("model", model))
	err := s.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM embed_queue q JOIN records r ON r.rowid = q.rid
		WHERE q.tries < @tries AND NOT EXISTS (SELECT 1 FROM embed_vectors v WHERE v.rid = q.rid AND v.model = @model)
		AND `+visible, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count queued records: %w", err)
	}
	return n, nil
}

// NoteDims tells the store that model now gives vectors of dims
// dimensions (a query's, say). If its stored vectors have another length,
// the model was replaced under its name: they are dropped and their
// records queued again. It reports whether that happened.
func (s *Index) NoteDims(ctx context.Context, model string, dims int) (bool, error) {
	var other int
	if err := s.st.DB().QueryRowContext(ctx, `SELECT CAST(EXISTS (SELECT 1 FROM embed_vectors WHERE model = $1 AND dims < $2) AS INTEGER)
		+ CAST(EXISTS (SELECT 1 FROM embed_vectors WHERE model = $1 AND dims > $2) AS INTEGER)`, model, dims).Scan(&other); err != nil {
		return false, fmt.Errorf("check vector length: %w", err)
	}
	if other == 0 {
		return false, nil
	}
	err := s.st.WriteTx(ctx, func(tx *sql.Tx) error { return checkDims(ctx, tx, model, dims) })
	if err != nil {
		return false, fmt.Errorf("check vector length: %w", err)
	}
	return true, nil
}
