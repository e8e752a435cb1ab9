package teamsync

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/team"
	"prom.codes/memory-mcp/scope"
)

// local is the bucket of a machine's shared memory (see memory.Bucket):
// its workspace, tenant and system records share the global one.
const local = ""

// Syncer syncs one store with one team server.
type Syncer struct {
	st  *memory.Store
	cfg Config
	c   *client
}

// New returns a Syncer of st with the server cfg names.
func New(st *memory.Store, cfg Config) *Syncer {
	return &Syncer{st: st, cfg: cfg, c: newClient(cfg)}
}

// Counts are what one round did.
type Counts struct {
	Pushed    int `json:"pushed"`    // changes the server stored
	Pulled    int `json:"pulled"`    // the team's changes applied here
	Conflicts int `json:"conflicts"` // versions of this machine's that lost
}

// Enable makes the store queue its shared changes. The first time (and
// when the team's URL changed, or the token is another user's), every
// workspace, tenant and system record already stored is queued, so that
// what this machine knew before it joined reaches the team.
func (s *Syncer) Enable(ctx context.Context) error {
	// The team is the URL and the token's user: a new token of the same
	// user at the same URL (the old one revoked) keeps what waits; another
	// user's, or another server, starts afresh.
	sum := sha256.Sum256([]byte(s.cfg.URL + "\x00" + s.cfg.Token))
	joined := s.cfg.URL + " " + hex.EncodeToString(sum[:8])
	m, err := s.meta(ctx, s.st.DB(), "team")
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	var on bool
	if err := s.st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_on)`).Scan(&on); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if on && m == joined {
		return nil
	}
	keep := false
	if on && m != "" {
		// Nothing is touched until the server answers and says whose
		// the token is: a round against a mistyped URL loses nothing.
		page, err := s.c.pull(ctx, 0, "", 1)
		if err != nil {
			return err
		}
		held, err := s.meta(ctx, s.st.DB(), "identity")
		if err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		who, _ := json.Marshal(page.Identity)
		keep = strings.HasPrefix(m, s.cfg.URL+" ") && held == string(who)
	}
	return s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		// Asked again under the write lock: another process on this
		// database may have joined since, and its queue must stay.
		if m, err = s.meta(ctx, tx, "team"); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_on)`).Scan(&on); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		if on && m == joined {
			return nil
		}
		if keep {
			return s.setMeta(ctx, tx, "team", joined)
		}
		if err := s.startAfresh(ctx, tx); err != nil {
			return err
		}
		if err := s.setMeta(ctx, tx, "team", joined); err != nil {
			return err
		}
		// A machine id of its own for each team joined: the server gives
		// an id to the user who first pushed under it.
		return s.setMeta(ctx, tx, "machine", team.NewID())
	})
}

// startAfresh forgets the team's state (the queue, the cursor) and
// queues every workspace, tenant and system record this machine holds,
// as for a team it has never synced with.
func (s *Syncer) startAfresh(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []string{`DELETE FROM sync_outbox`, `DELETE FROM sync_names`, `DELETE FROM sync_held`,
		`DELETE FROM sync_meta WHERE name IN ('cursor', 'cursor_id', 'identity', 'last_sync', 'last_error')`,
		`INSERT INTO sync_on (id) VALUES (1) ON CONFLICT DO NOTHING`,
		`INSERT INTO sync_outbox (bucket, scope, type, key) SELECT project, scope, type, key FROM records
			WHERE project = '' AND scope > 0 ORDER BY rowid ON CONFLICT DO NOTHING`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	return nil
}

// Disable stops queueing and forgets the team's state: its cursor and
// what is waiting to go. Conflicts and changes set aside stay.
func Disable(ctx context.Context, st *memory.Store) error {
	return st.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM sync_on`, `DELETE FROM sync_outbox`, `DELETE FROM sync_names`, `DELETE FROM sync_held`,
			`DELETE FROM sync_meta WHERE name IN ('team', 'cursor', 'cursor_id', 'identity', 'last_sync', 'last_error')`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("team leave: %w", err)
			}
		}
		return nil
	})
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Syncer) meta(ctx context.Context, q querier, name string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM sync_meta WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func (s *Syncer) setMeta(ctx context.Context, tx *sql.Tx, name, value string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sync_meta (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
	return err
}

// Round pushes what is queued, then pulls the team's changes. A failure
// is an *Error when it was the server or the way to it; the changes
// stored and applied before it stay so.
func (s *Syncer) Round(ctx context.Context) (Counts, error) {
	var n Counts
	err := s.Enable(ctx)
	if err == nil {
		n.Pushed, err = s.push(ctx)
	}
	if err == nil {
		n.Pulled, n.Conflicts, err = s.pull(ctx)
	}
	if errors.Is(err, errLost) {
		// The server's log is not the one the cursor was in: what this
		// machine pushed may be gone from it. Push everything again
		// (the versions the log holds already are no news to it), then
		// pull it all.
		err = s.st.WriteTx(ctx, func(tx *sql.Tx) error { return s.startAfresh(ctx, tx) })
		var again Counts
		if err == nil {
			again.Pushed, err = s.push(ctx)
		}
		if err == nil {
			again.Pulled, again.Conflicts, err = s.pull(ctx)
		}
		if errors.Is(err, errLost) {
			err = &Error{Kind: ServerError, Msg: "team server's change log lost this machine's place twice in one round; try again"}
		}
		n.Pushed, n.Pulled, n.Conflicts = n.Pushed+again.Pushed, n.Pulled+again.Pulled, n.Conflicts+again.Conflicts
	}
	ctx = context.WithoutCancel(ctx)
	s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		if err != nil {
			return s.setMeta(ctx, tx, "last_error", err.Error())
		}
		if err := s.setMeta(ctx, tx, "last_sync", strconv.FormatInt(s.st.Now().UnixNano(), 10)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sync_meta WHERE name = 'last_error'`)
		return err
	})
	return n, err
}

// close freezes every open change: its id, its operation and record as
// the store holds it now, and its base. From here on it is sent as it is,
// however often.
func (s *Syncer) close(ctx context.Context) error {
	var open bool
	if err := s.st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_outbox WHERE change_id IS NULL)`).Scan(&open); err != nil || !open {
		return err // nothing to close: no write transaction
	}
	return s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		machine, err := s.meta(ctx, tx, "machine")
		if err != nil {
			return err
		}
		var who team.Identity
		if v, err := s.meta(ctx, tx, "identity"); err != nil {
			return err
		} else if v != "" {
			json.Unmarshal([]byte(v), &who)
		}
		opens, err := team.Waiting(ctx, tx)
		if err != nil {
			return err
		}
		for _, o := range opens {
			if o.Bucket != local {
				// A team identity's records (this store is a team
				// server's too): not this machine's to share.
				if _, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE id = $1`, o.Row); err != nil {
					return err
				}
				continue
			}
			c := team.Change{ID: team.NewID(), Machine: machine, Scope: o.Scope.String(), Type: string(o.Type), Key: o.Key, Op: team.OpDelete}
			rec, err := s.st.Named(ctx, tx, o.Bucket, o.Scope, o.Type, o.Key)
			if err == nil {
				c.Op, c.Record = team.OpPut, team.VersionOf(rec)
			} else if !errors.Is(err, memory.ErrNotFound) {
				return err
			}
			if c.Base, err = nameSeq(ctx, tx, o.Scope, o.Type, o.Key); err != nil {
				return err
			}
			if c.Op == team.OpDelete && c.Base == 0 {
				// Made and deleted here before the team ever had it: a
				// change of the team's held behind it has nothing to wait for.
				if _, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE id = $1`, o.Row); err != nil {
					return err
				}
				if err := s.release(ctx, tx, machine, o.Scope, c, false); err != nil {
					return err
				}
				continue
			}
			if o.Scope != scope.System {
				c.Tenant = who.Tenant
			}
			if o.Scope == scope.Workspace {
				c.User = who.User
			}
			b, _ := json.Marshal(c)
			if _, err := tx.ExecContext(ctx, `UPDATE sync_outbox SET change_id = $1, op = $2, base = $3, record = $4, created_at = $5 WHERE id = $6`,
				c.ID, c.Op, c.Base, string(b), s.st.Now().UnixNano(), o.Row); err != nil {
				return err
			}
		}
		return nil
	})
}

func nameSeq(ctx context.Context, q querier, lv scope.Level, t memory.Type, key string) (int64, error) {
	var seq int64
	err := q.QueryRowContext(ctx, `SELECT seq FROM sync_names WHERE bucket = $1 AND scope = $2 AND type = $3 AND key = $4`,
		local, int(lv), string(t), key).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// setSeq notes that this machine holds the version seq of a name, unless
// it holds a later one.
func setSeq(ctx context.Context, tx *sql.Tx, lv scope.Level, t, key string, seq int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sync_names (bucket, scope, type, key, seq) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (bucket, scope, type, key) DO UPDATE SET seq = CASE WHEN excluded.seq > sync_names.seq THEN excluded.seq ELSE sync_names.seq END`,
		local, int(lv), t, key, seq)
	return err
}

// maxBatch keeps a push under the team server's cap on a request's body
// (1 MiB).
const maxBatch = 768 << 10

// push closes the open changes and sends every change not yet stored, in
// the order they were made, in batches. It returns how many the server
// stored.
func (s *Syncer) push(ctx context.Context) (int, error) {
	if err := s.close(ctx); err != nil {
		return 0, fmt.Errorf("sync: %w", err)
	}
	machine, err := s.meta(ctx, s.st.DB(), "machine")
	if err != nil {
		return 0, fmt.Errorf("sync: %w", err)
	}
	stored := 0
	var after int64
	for {
		batch, last, err := s.waiting(ctx, after)
		if err != nil || len(batch) == 0 {
			return stored, err
		}
		after = last
		res, err := s.c.push(ctx, batch)
		if err != nil {
			return stored, err
		}
		// Only now, with the server's word, is a change marked sent.
		err = s.st.WriteTx(ctx, func(tx *sql.Tx) error {
			for i, r := range res {
				c := batch[i]
				lv, _ := scope.Parse(c.Scope)
				if r.Status == team.Stored {
					if _, err := tx.ExecContext(ctx, `UPDATE sync_outbox SET seq = $1 WHERE change_id = $2`, r.Seq, c.ID); err != nil {
						return err
					}
					if err := setSeq(ctx, tx, lv, c.Type, c.Key, r.Seq); err != nil {
						return err
					}
					if err := s.release(ctx, tx, machine, lv, c, false); err != nil {
						return err
					}
					continue
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE change_id = $1`, c.ID); err != nil {
					return err
				}
				if err := s.setAside(ctx, tx, "push", c, r.Reason); err != nil {
					return err
				}
				if err := s.release(ctx, tx, machine, lv, c, true); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return stored, fmt.Errorf("sync: %w", err)
		}
		for _, r := range res {
			if r.Status == team.Stored {
				stored++
			}
		}
	}
}

// waiting reads the next batch of changes closed and not yet stored,
// after the outbox row after.
func (s *Syncer) waiting(ctx context.Context, after int64) ([]team.Change, int64, error) {
	rows, err := s.st.DB().QueryContext(ctx, `SELECT id, record FROM sync_outbox
		WHERE change_id IS NOT NULL AND seq IS NULL AND id > $1 ORDER BY id LIMIT $2`, after, team.MaxPush)
	if err != nil {
		return nil, 0, fmt.Errorf("sync: %w", err)
	}
	defer rows.Close()
	var out []team.Change
	size := 0
	for rows.Next() {
		var id int64
		var rec string
		if err := rows.Scan(&id, &rec); err != nil {
			return nil, 0, err
		}
		if len(out) > 0 && size+len(rec) > maxBatch {
			break
		}
		var c team.Change
		if err := json.Unmarshal([]byte(rec), &c); err != nil {
			return nil, 0, fmt.Errorf("sync: outbox row %d: %w", id, err)
		}
		out, size, after = append(out, c), size+len(rec), id
	}
	return out, after, rows.Err()
}

func (s *Syncer) setAside(ctx context.Context, tx *sql.Tx, dir string, c team.Change, reason string) error {
	lv, _ := scope.Parse(c.Scope)
	_, err := tx.ExecContext(ctx, `INSERT INTO sync_aside (change_id, dir, scope, type, key, reason, at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ID, dir, int(lv), c.Type, c.Key, reason, s.st.Now().UnixNano())
	return err
}

// pull applies the team's changes after the cursor, a page at a time:
// each page and the cursor past it commit together, so a pull stopped
// anywhere resumes where it stopped, nothing lost and nothing twice.
func (s *Syncer) pull(ctx context.Context) (applied, conflicts int, err error) {
	machine, err := s.meta(ctx, s.st.DB(), "machine")
	if err != nil {
		return 0, 0, fmt.Errorf("sync: %w", err)
	}
	for {
		cur, err := s.cursor(ctx, s.st.DB())
		if err != nil {
			return applied, conflicts, fmt.Errorf("sync: %w", err)
		}
		curID, err := s.meta(ctx, s.st.DB(), "cursor_id")
		if err != nil {
			return applied, conflicts, fmt.Errorf("sync: %w", err)
		}
		page, err := s.c.pull(ctx, cur, curID, team.DefaultPull)
		if err != nil {
			return applied, conflicts, err
		}
		if page.Lost {
			return applied, conflicts, errLost
		}
		who, _ := json.Marshal(page.Identity)
		if len(page.Changes) == 0 && page.Next == cur && !page.More {
			if held, err := s.meta(ctx, s.st.DB(), "identity"); err == nil && held == string(who) {
				return applied, conflicts, nil // nothing new: nothing to write
			}
		}
		var a, k int
		err = s.st.WriteTx(ctx, func(tx *sql.Tx) error {
			a, k = 0, 0
			if now, err := s.cursor(ctx, tx); err != nil || now != cur {
				return err // another process applied this page meanwhile
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO sync_applying (id) VALUES (1)`); err != nil {
				return err
			}
			for _, c := range page.Changes {
				did, lost, err := s.apply(ctx, tx, machine, c)
				if err != nil {
					return err
				}
				if did {
					a++
				}
				if lost {
					k++
				}
			}
			if err := s.setMeta(ctx, tx, "identity", string(who)); err != nil {
				return err
			}
			if err := s.setMeta(ctx, tx, "cursor", strconv.FormatInt(page.Next, 10)); err != nil {
				return err
			}
			if n := len(page.Changes); n > 0 {
				if err := s.setMeta(ctx, tx, "cursor_id", page.Changes[n-1].ID); err != nil {
					return err
				}
			}
			// Changes of this machine's that the cursor has passed are
			// done with.
			if _, err := tx.ExecContext(ctx, `DELETE FROM sync_outbox WHERE seq IS NOT NULL AND seq <= $1`, page.Next); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM sync_applying`)
			return err
		})
		if err != nil {
			return applied, conflicts, fmt.Errorf("sync: %w", err)
		}
		applied, conflicts = applied+a, conflicts+k
		if !page.More {
			return applied, conflicts, nil
		}
	}
}

// errLost is a pull the server answered Lost (see team.PullResponse).
var errLost = errors.New("the team server's change log does not hold this machine's cursor")

func (s *Syncer) cursor(ctx context.Context, q querier) (int64, error) {
	v, err := s.meta(ctx, q, "cursor")
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// apply applies one pulled change, inside the page's transaction. It
// reports whether the change was applied and whether it replaced a
// version of this machine's, which is then kept as a conflict.
func (s *Syncer) apply(ctx context.Context, tx *sql.Tx, machine string, c team.Change) (applied, lost bool, err error) {
	lv, perr := scope.Parse(c.Scope)
	typ, terr := memory.ParseType("type", c.Type)
	if perr != nil || terr != nil || lv == scope.Project {
		return false, false, s.setAside(ctx, tx, "pull", c, "malformed: unknown scope or type")
	}
	// What this build takes for a secret (the server's rules may be
	// older) is set aside before anything of the change is kept, as a
	// conflict or held: only its name and the reason are.
	if err := scanChange(lv, typ, c); err != nil {
		return false, false, s.asideSecret(ctx, tx, c, "", err)
	}
	mine := c.Machine == machine && machine != ""
	if c.Replaced != nil {
		if err := scanChange(lv, typ, *c.Replaced); err != nil {
			if c.Replaced.Machine == machine && !mine { // this machine's, which it would keep
				if err := s.asideSecret(ctx, tx, *c.Replaced, "the version it replaced: ", err); err != nil {
					return false, false, err
				}
			}
			c.Replaced = nil
		}
	}
	if c.Replaced != nil && c.Replaced.Machine == machine && !mine {
		lost = true
		winner, _ := json.Marshal(c)
		loser, _ := json.Marshal(c.Replaced)
		if err := s.keepConflict(ctx, tx, lv, c, string(winner), string(loser)); err != nil {
			return false, false, err
		}
	}
	pending, err := waits(ctx, tx, lv, c.Type, c.Key)
	if err != nil {
		return false, lost, err
	}
	have, err := nameSeq(ctx, tx, lv, typ, c.Key)
	if err != nil {
		return false, lost, err
	}
	// This machine's own change coming back; a change here the server has
	// not ordered yet, which it will order after this one, so that it
	// wins; or a version older than the one held: none is applied. The
	// team's change behind a waiting one is held until the server has
	// answered for that one (see release).
	if mine || c.Seq <= have {
		return false, lost, nil
	}
	if pending {
		// Without the version it replaced: that is a conflict already
		// noted above, if it is one.
		held := c
		held.Replaced = nil
		b, _ := json.Marshal(held)
		_, err := tx.ExecContext(ctx, `INSERT INTO sync_held (scope, type, key, seq, change) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (scope, type, key) DO UPDATE SET seq = excluded.seq, change = excluded.change WHERE excluded.seq > sync_held.seq`,
			int(lv), c.Type, c.Key, c.Seq, string(b))
		return false, lost, err
	}
	p := memory.Project{}
	switch c.Op {
	case team.OpPut:
		if c.Record == nil {
			return false, lost, s.setAside(ctx, tx, "pull", c, "malformed: a put without its record")
		}
		_, _, err = s.st.PutTx(ctx, tx, p, team.WriteOf(lv, typ, c.Key, c.Record, s.st.Now()))
	case team.OpDelete:
		_, err = s.st.DeleteTx(ctx, tx, p, lv, typ, c.Key)
		if errors.Is(err, memory.ErrNotFound) {
			err = nil
		}
	default:
		err = memory.Errorf(memory.CodeInvalidArgument, "op", "is not put or delete")
	}
	var me *memory.Error
	if errors.As(err, &me) {
		// Refused here (a rule this build has and the server's had not):
		// set aside, and the changes after it go on.
		return false, lost, s.setAside(ctx, tx, "pull", c, err.Error())
	}
	if err != nil {
		return false, lost, err
	}
	return true, lost, setSeq(ctx, tx, lv, c.Type, c.Key, c.Seq)
}

// release settles the team's change held back for the name of mine, a
// change of this machine's the server has answered for, once nothing of
// this machine's waits for that name any more. It is applied if the
// server orders it after mine: when the server refused mine (the team's
// version stands after all, and the refused one is kept as a conflict it
// lost, as sync status shows and sync restore can bring back), or stored
// mine, in an earlier push whose answer was lost, before it. Otherwise
// mine is the later one, and the held change is dropped.
func (s *Syncer) release(ctx context.Context, tx *sql.Tx, machine string, lv scope.Level, mine team.Change, refused bool) error {
	if pending, err := waits(ctx, tx, lv, mine.Type, mine.Key); err != nil || pending {
		return err
	}
	var held string
	err := tx.QueryRowContext(ctx, `DELETE FROM sync_held WHERE scope = $1 AND type = $2 AND key = $3 RETURNING change`,
		int(lv), mine.Type, mine.Key).Scan(&held)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var c team.Change
	if err := json.Unmarshal([]byte(held), &c); err != nil {
		return fmt.Errorf("held change of %s/%s/%s: %w", lv, mine.Type, mine.Key, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sync_applying (id) VALUES (1)`); err != nil {
		return err
	}
	applied, _, err := s.apply(ctx, tx, machine, c)
	if err != nil {
		return err
	}
	if applied && refused {
		loser, _ := json.Marshal(mine)
		if err := s.keepConflict(ctx, tx, lv, c, held, string(loser)); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM sync_applying`)
	return err
}

// waits reports whether a change of this machine's to the name waits to
// be sent: open, or closed and not yet stored.
func waits(ctx context.Context, tx *sql.Tx, lv scope.Level, typ, key string) (bool, error) {
	var pending bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sync_outbox WHERE bucket = $1 AND scope = $2 AND type = $3 AND key = $4 AND seq IS NULL)`,
		local, int(lv), typ, key).Scan(&pending)
	return pending, err
}

// keepConflict keeps loser, a version of this machine's, as lost to
// winner, the change c.
func (s *Syncer) keepConflict(ctx context.Context, tx *sql.Tx, lv scope.Level, c team.Change, winner, loser string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sync_conflicts (bucket, seq, scope, type, key, winner, loser, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, local, c.Seq, int(lv), c.Type, c.Key, winner, loser, s.st.Now().UnixNano())
	return err
}

// scanChange reports a secret in the name or the record of c as the
// store's write would, naming the field and never the value.
func scanChange(lv scope.Level, typ memory.Type, c team.Change) error {
	if c.Record == nil {
		return memory.ScanField("key", c.Key)
	}
	w := team.WriteOf(lv, typ, c.Key, c.Record, time.Time{})
	return memory.ScanWrite(&w)
}

// asideSecret sets c aside for a secret, err, with why before the
// reason; a key shaped like a secret is withheld.
func (s *Syncer) asideSecret(ctx context.Context, tx *sql.Tx, c team.Change, why string, err error) error {
	if memory.ScanField("key", c.Key) != nil {
		c.Key = "(withheld: shaped like a secret)"
	}
	return s.setAside(ctx, tx, "pull", c, why+err.Error())
}

// lastSync reads when the last round succeeded.
func (s *Syncer) lastSync(ctx context.Context) (*time.Time, error) {
	v, err := s.meta(ctx, s.st.DB(), "last_sync")
	if err != nil || v == "" {
		return nil, err
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	t := time.Unix(0, n).UTC()
	return &t, nil
}
