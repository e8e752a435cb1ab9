package team

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

// Log is the team server's change log, kept in the store's database
// beside its records: the sync_* tables of the migrations.
type Log struct {
	st *memory.Store
}

// New returns the log of st.
func New(st *memory.Store) *Log { return &Log{st: st} }

// Enable starts the log: from now on every write of a token's shared
// memory, through MCP as much as through a push, is in it. The first time,
// the shared records already stored go in as changes, so that machines
// joining later pull them too.
func (l *Log) Enable(ctx context.Context) error {
	var on bool
	if err := l.st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_on)`).Scan(&on); err != nil {
		return fmt.Errorf("enable sync: %w", err)
	}
	if on {
		return nil
	}
	return l.st.WriteTx(ctx, func(tx *sql.Tx) error {
		// Asked again under the write lock: another replica may have
		// started the log since.
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_on)`).Scan(&on); err != nil || on {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_on (id) VALUES (1) ON CONFLICT DO NOTHING`); err != nil {
			return fmt.Errorf("enable sync: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_outbox (bucket, scope, type, key)
			SELECT project, scope, type, key FROM records WHERE scope > 0 ORDER BY rowid ON CONFLICT DO NOTHING`); err != nil {
			return fmt.Errorf("enable sync: %w", err)
		}
		return l.drain(ctx, tx, &seqs{})
	})
}

// shared reports whether bucket b holds memory of level lv that a token
// can see: its workspace's or tenant's, or the system's.
func shared(b string, lv scope.Level) bool {
	if b == "" {
		return lv == scope.System
	}
	return strings.HasPrefix(b, "team:") && lv != scope.System && lv != scope.Project
}

// Name is a record's name waiting in the outbox, in the row Row.
type Name struct {
	Row    int64
	Bucket string
	Scope  scope.Level
	Type   memory.Type
	Key    string
}

// Waiting returns the names waiting in the outbox that no change has
// closed yet, in the order they came.
func Waiting(ctx context.Context, tx *sql.Tx) ([]Name, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, bucket, scope, type, key FROM sync_outbox WHERE change_id IS NULL ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []Name
	for rows.Next() {
		var n Name
		if err := rows.Scan(&n.Row, &n.Bucket, &n.Scope, &n.Type, &n.Key); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

// drain turns the changes that writers other than a push left in the
// outbox (MCP tools over HTTP, the command line) into changes of the log.
func (l *Log) drain(ctx context.Context, tx *sql.Tx, q *seqs) error {
	names, err := Waiting(ctx, tx)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	for _, n := range names {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE id = $1`, n.Row); err != nil {
			return err
		}
		if !shared(n.Bucket, n.Scope) {
			continue
		}
		c := Change{ID: "srv-" + NewID(), Scope: n.Scope.String(), Type: string(n.Type), Key: n.Key, Op: OpDelete}
		rec, err := l.st.Named(ctx, tx, n.Bucket, n.Scope, n.Type, n.Key)
		if err == nil {
			c.Op, c.Record = OpPut, VersionOf(rec)
		} else if !errors.Is(err, memory.ErrNotFound) {
			return err
		}
		latest, err := latestOf(ctx, tx, n.Bucket, n.Scope, n.Type, n.Key)
		if err != nil {
			return err
		}
		if c.Op == OpDelete && (latest.seq == 0 || latest.op == OpDelete) {
			continue // nothing the log holds is gone
		}
		c.Base = latest.seq
		if _, err := l.append(ctx, tx, q, n.Bucket, n.Scope, c, 0); err != nil {
			return err
		}
	}
	return nil
}

// VersionOf is the content of rec as it travels.
func VersionOf(rec memory.Record) *Version {
	v := &Version{Description: rec.Description, Body: rec.Body, Tags: rec.Tags, Confidence: &rec.Confidence, Metadata: rec.Metadata}
	if rec.ExpiresAt != nil {
		t := rec.ExpiresAt.UTC()
		v.ExpiresAt = &t
	}
	if len(v.Metadata) == 0 {
		v.Metadata = nil
	}
	return v
}

// latest is the log's latest change of a name.
type latest struct {
	seq     int64
	op      string
	machine string
	record  string // the version it put, as the log holds it
}

func latestOf(ctx context.Context, tx *sql.Tx, b string, lv scope.Level, t memory.Type, key string) (latest, error) {
	var la latest
	err := tx.QueryRowContext(ctx, `SELECT l.seq, l.op, l.machine, l.record FROM sync_names n JOIN sync_log l ON l.seq = n.seq
		WHERE n.bucket = $1 AND n.scope = $2 AND n.type = $3 AND n.key = $4`, b, int(lv), string(t), key).Scan(&la.seq, &la.op, &la.machine, &la.record)
	if errors.Is(err, sql.ErrNoRows) {
		return latest{}, nil
	}
	return la, err
}

// seqs hands out the seqs of one write transaction. Every write
// transaction takes the write lock first (SQLite's one writer;
// PostgreSQL's advisory lock), so the log's max + 1 and those after it
// are this transaction's alone, and seqs commit in the order they are
// given: a pull after N never meets a later commit below N.
type seqs struct{ next int64 }

func (q *seqs) take(ctx context.Context, tx *sql.Tx) (int64, error) {
	if q.next == 0 {
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM sync_log`).Scan(&q.next); err != nil {
			return 0, err
		}
	}
	q.next++
	return q.next - 1, nil
}

// append gives c the next seq and writes it to the log, as the latest of
// its name; replaced, when not 0, is the change it replaced unseen.
func (l *Log) append(ctx context.Context, tx *sql.Tx, q *seqs, b string, lv scope.Level, c Change, replaced int64) (int64, error) {
	seq, err := q.take(ctx, tx)
	if err != nil {
		return 0, err
	}
	rec := ""
	if c.Record != nil {
		b, _ := json.Marshal(c.Record)
		rec = string(b)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sync_log (seq, change_id, machine, bucket, scope, type, key, op, record, base, replaced, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		seq, c.ID, c.Machine, b, int(lv), c.Type, c.Key, c.Op, rec, c.Base, replaced, l.st.Now().UnixNano()); err != nil {
		return 0, fmt.Errorf("append to the log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sync_names (bucket, scope, type, key, seq) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (bucket, scope, type, key) DO UPDATE SET seq = excluded.seq`, b, int(lv), c.Type, c.Key, seq); err != nil {
		return 0, err
	}
	return seq, nil
}

// NewID returns a new random change id.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// refusal is a change refused for what it is, never for the database.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

func refuse(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// Push stores the changes tok pushes, in order, in one transaction, and
// says what became of each. A change refused (malformed, unauthorised, a
// secret, invalid) is left out and never stops the ones after it; an
// error is the database's, and then nothing was stored.
func (l *Log) Push(ctx context.Context, tok memory.Token, changes []Change) ([]Result, error) {
	var out []Result
	err := l.st.WriteTx(ctx, func(tx *sql.Tx) error {
		out = make([]Result, len(changes))
		q := &seqs{}
		if err := l.drain(ctx, tx, q); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_applying (id) VALUES (1)`); err != nil {
			return err
		}
		for i, c := range changes {
			seq, err := l.accept(ctx, tx, q, tok, c)
			var r *refusal
			switch {
			case errors.As(err, &r):
				out[i] = Result{ID: c.ID, Status: Refused, Reason: r.reason}
			case err != nil:
				return err
			default:
				out[i] = Result{ID: c.ID, Status: Stored, Seq: seq}
			}
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sync_applying`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	return out, nil
}

// accept stores one change: in the records, so the team server's own
// callers see it, and in the log.
func (l *Log) accept(ctx context.Context, tx *sql.Tx, q *seqs, tok memory.Token, c Change) (int64, error) {
	if !idRE.MatchString(c.ID) {
		return 0, refuse("malformed: id must be 1 to 64 letters, digits, '-' or '_'")
	}
	if c.Machine != "" && !idRE.MatchString(c.Machine) {
		return 0, refuse("malformed: machine must be 1 to 64 letters, digits, '-' or '_'")
	}
	// Every teammate who pulls is handed both ids.
	for _, f := range [][2]string{{"id", c.ID}, {"machine", c.Machine}} {
		if err := memory.ScanKey(f[0], f[1]); err != nil {
			return 0, refuse("%v", err)
		}
	}
	lv, err := scope.Parse(c.Scope)
	if err != nil || lv == scope.Project {
		return 0, refuse("malformed: scope must be workspace, tenant or system (project memory is not shared)")
	}
	if lv == scope.System && !tok.Admin {
		return 0, refuse("unauthorised: system memory takes an admin token")
	}
	if c.Tenant != "" && c.Tenant != tok.Tenant {
		return 0, refuse("unauthorised: the change is for another tenant than the token's")
	}
	if c.User != "" && c.User != tok.User {
		return 0, refuse("unauthorised: the change is for another user's memory than the token's")
	}
	if err := ownMachine(ctx, tx, tok, c.Machine); err != nil {
		return 0, err
	}
	id := tok.Identity()
	b := memory.Bucket(id, lv)
	var have string
	var seq int64
	err = tx.QueryRowContext(ctx, `SELECT bucket, seq FROM sync_log WHERE change_id = $1`, c.ID).Scan(&have, &seq)
	if err == nil {
		if have != b {
			return 0, refuse("malformed: the change id is taken")
		}
		return seq, nil // pushed before, its answer lost
	} else if !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	typ, err := memory.ParseType("type", c.Type)
	if err != nil {
		return 0, refuse("malformed: %v", err)
	}
	key, err := memory.NormalizeKey("key", c.Key)
	if err == nil {
		err = memory.ScanField("key", key)
	}
	if err != nil {
		return 0, refuse("%v", err)
	}
	c.Key, c.Type = key, string(typ)
	la, err := latestOf(ctx, tx, b, lv, typ, key)
	if err != nil {
		return 0, err
	}
	p := tok.Project()
	switch c.Op {
	case OpPut:
		if c.Record == nil {
			return 0, refuse("malformed: a put carries its record")
		}
		rec, _, err := l.st.PutTx(ctx, tx, p, WriteOf(lv, typ, key, c.Record, l.st.Now()))
		if err != nil {
			return 0, refusedOr(err)
		}
		c.Record = VersionOf(rec)
		if held, _ := json.Marshal(c.Record); la.op == OpPut && la.record == string(held) {
			return la.seq, nil // the team holds this version already: nothing to tell anyone
		}
	case OpDelete:
		c.Record = nil
		if _, err := l.st.DeleteTx(ctx, tx, p, lv, typ, key); errors.Is(err, memory.ErrNotFound) {
			if la.seq == 0 || la.op == OpDelete {
				return la.seq, nil // gone already: nothing to tell anyone
			}
		} else if err != nil {
			return 0, refusedOr(err)
		}
	default:
		return 0, refuse("malformed: op must be put or delete")
	}
	var replaced int64
	if la.seq > c.Base && (c.Machine == "" || la.machine != c.Machine) {
		replaced = la.seq
	}
	seq, err = l.append(ctx, tx, q, b, lv, c, replaced)
	if err != nil || replaced == 0 {
		return seq, err
	}
	return seq, l.noteConflict(ctx, tx, b, lv, seq, replaced)
}

// ownMachine makes machine (if any) tok's user's, if it is no one's yet,
// and refuses it if it is another's: teammates pull every change's
// machine id, and a machine takes a change under its own id for its own,
// never to be applied.
func ownMachine(ctx context.Context, tx *sql.Tx, tok memory.Token, machine string) error {
	if machine == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sync_machines (machine, tenant, user_name) VALUES ($1, $2, $3)
		ON CONFLICT (machine) DO NOTHING`, machine, tok.Tenant, tok.User); err != nil {
		return err
	}
	var tenant, user string
	if err := tx.QueryRowContext(ctx, `SELECT tenant, user_name FROM sync_machines WHERE machine = $1`, machine).Scan(&tenant, &user); err != nil {
		return err
	}
	if tenant != tok.Tenant || user != tok.User {
		return refuse("unauthorised: the machine id is another user's")
	}
	return nil
}

// refusedOr is err as a refusal when it is about the change (memory's
// *Error: invalid, too large, a secret), else err.
func refusedOr(err error) error {
	var me *memory.Error
	if errors.As(err, &me) {
		return refuse("%v", err)
	}
	return err
}

// WriteOf is the write that stores v as the record of lv, typ and key.
func WriteOf(lv scope.Level, typ memory.Type, key string, v *Version, now time.Time) memory.Write {
	w := memory.Write{
		Scope: lv, Type: typ, Key: key, Description: v.Description, Body: v.Body, Tags: v.Tags,
		Metadata: v.Metadata, Source: memory.FromSync, Confidence: v.Confidence,
	}
	if v.ExpiresAt != nil {
		ttl := v.ExpiresAt.Sub(now)
		if ttl < time.Second {
			ttl = time.Second // it has expired or is about to: it goes with the next purge
		}
		w.TTL = &ttl
	}
	return w
}

// noteConflict keeps the version the change seq replaced unseen.
func (l *Log) noteConflict(ctx context.Context, tx *sql.Tx, b string, lv scope.Level, seq, replaced int64) error {
	cs, err := readLog(ctx, tx, `WHERE l.seq = $1 OR l.seq = $2 ORDER BY l.seq`, replaced, seq)
	if err != nil || len(cs) != 2 {
		return err
	}
	loser, _ := json.Marshal(cs[0])
	winner, _ := json.Marshal(cs[1])
	_, err = tx.ExecContext(ctx, `INSERT INTO sync_conflicts (bucket, seq, scope, type, key, winner, loser, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, b, seq, int(lv), cs[1].Type, cs[1].Key, string(winner), string(loser), l.st.Now().UnixNano())
	return err
}

// readLog reads changes of the log, l, with the versions they replaced.
func readLog(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, where string, args ...any) ([]Change, error) {
	rows, err := q.QueryContext(ctx, `SELECT l.seq, l.change_id, l.machine, l.scope, l.type, l.key, l.op, l.record, l.base, l.at,
		coalesce(r.seq, 0), coalesce(r.change_id, ''), coalesce(r.machine, ''), coalesce(r.op, ''), coalesce(r.record, ''), coalesce(r.at, 0)
		FROM sync_log l LEFT JOIN sync_log r ON r.seq = l.replaced `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		var c, r Change
		var lv scope.Level
		var rec, rrec string
		var at, rat int64
		if err := rows.Scan(&c.Seq, &c.ID, &c.Machine, &lv, &c.Type, &c.Key, &c.Op, &rec, &c.Base, &at,
			&r.Seq, &r.ID, &r.Machine, &r.Op, &rrec, &rat); err != nil {
			return nil, err
		}
		c.Scope = lv.String()
		c.Record, c.At = decodeVersion(rec), unixTime(at)
		if r.Seq != 0 {
			r.Scope, r.Type, r.Key = c.Scope, c.Type, c.Key
			r.Record, r.At = decodeVersion(rrec), unixTime(rat)
			c.Replaced = &r
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func decodeVersion(s string) *Version {
	if s == "" {
		return nil
	}
	var v Version
	if json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	return &v
}

func unixTime(n int64) *time.Time {
	t := time.Unix(0, n).UTC()
	return &t
}

// Pull returns the changes tok may see after the cursor after, in order,
// at most limit of them: those of its user's workspace, its tenant, and
// the system. afterID, when not empty, is the id of the change at after,
// as the machine pulled it; a log that holds another change there, or
// none, answers Lost.
func (l *Log) Pull(ctx context.Context, tok memory.Token, after int64, afterID string, limit int) (PullResponse, error) {
	if limit <= 0 || limit > MaxPull {
		limit = DefaultPull
	}
	if after > 0 && afterID != "" {
		var have string
		err := l.st.DB().QueryRowContext(ctx, `SELECT change_id FROM sync_log WHERE seq = $1`, after).Scan(&have)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return PullResponse{}, fmt.Errorf("pull: %w", err)
		}
		if have != afterID {
			return PullResponse{Identity: Identity{Tenant: tok.Tenant, User: tok.User, Admin: tok.Admin}, Changes: []Change{}, Lost: true}, nil
		}
	}
	var waiting bool
	if err := l.st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_outbox)`).Scan(&waiting); err != nil {
		return PullResponse{}, fmt.Errorf("pull: %w", err)
	}
	if waiting {
		if err := l.st.WriteTx(ctx, func(tx *sql.Tx) error { return l.drain(ctx, tx, &seqs{}) }); err != nil {
			return PullResponse{}, fmt.Errorf("pull: %w", err)
		}
	}
	id := tok.Identity()
	// Each bucket's changes are read by its own index, at most limit
	// of them, however many other tenants have.
	page := `SELECT seq FROM (SELECT seq FROM sync_log WHERE bucket = %s AND seq > $2 ORDER BY seq LIMIT $3) AS %s`
	where := `WHERE l.seq IN (` + fmt.Sprintf(page, "$1", "w") + ` UNION ALL ` + fmt.Sprintf(page, "$4", "t") +
		` UNION ALL ` + fmt.Sprintf(page, "''", "s") + `) ORDER BY l.seq LIMIT $3`
	cs, err := memory.Retry(ctx, l.st, func() ([]Change, error) {
		return readLog(ctx, l.st.DB(), where, memory.Bucket(id, scope.Workspace), after, limit+1, memory.Bucket(id, scope.Tenant))
	})
	if err != nil {
		return PullResponse{}, fmt.Errorf("pull: %w", err)
	}
	resp := PullResponse{Identity: Identity{Tenant: tok.Tenant, User: tok.User, Admin: tok.Admin}, Changes: cs, Next: after}
	if len(cs) > limit {
		resp.Changes, resp.More = cs[:limit], true
	}
	if n := len(resp.Changes); n > 0 {
		resp.Next = resp.Changes[n-1].Seq
	}
	if resp.Changes == nil {
		resp.Changes = []Change{}
	}
	return resp, nil
}
