package teamsync

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/team"
	"prom.codes/memory-mcp/scope"
)

// Status is what sync status shows. It never holds the token.
type Status struct {
	URL       string     `json:"url"`
	From      string     `json:"from,omitempty"` // "environment" or the file
	LastSync  *time.Time `json:"last_sync,omitempty"`
	LastError string     `json:"last_error,omitempty"`
	Pending   int        `json:"pending"`
	Cursor    int64      `json:"cursor"`
	Aside     []Aside    `json:"set_aside"`
	Conflicts []Conflict `json:"conflicts"`
}

// Aside is a change set aside, with the reason.
type Aside struct {
	ChangeID string    `json:"change_id"`
	Dir      string    `json:"direction"` // push or pull
	Scope    string    `json:"scope"`
	Type     string    `json:"type"`
	Key      string    `json:"key"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// Conflict is a version of this machine's that lost to a later one.
type Conflict struct {
	ID     int64       `json:"id"`
	Scope  string      `json:"scope"`
	Type   string      `json:"type"`
	Key    string      `json:"key"`
	At     time.Time   `json:"at"`
	Winner team.Change `json:"winner"`
	Loser  team.Change `json:"loser"`
}

// Status reads the state of sync.
func (s *Syncer) Status(ctx context.Context) (Status, error) {
	st := Status{URL: s.cfg.URL, From: s.cfg.From, Aside: []Aside{}, Conflicts: []Conflict{}}
	var err error
	if st.LastSync, err = s.lastSync(ctx); err != nil {
		return st, fmt.Errorf("sync status: %w", err)
	}
	db := s.st.DB()
	if st.LastError, err = s.meta(ctx, db, "last_error"); err != nil {
		return st, err
	}
	if st.Cursor, err = s.cursor(ctx, db); err != nil {
		return st, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sync_outbox WHERE seq IS NULL`).Scan(&st.Pending); err != nil {
		return st, err
	}
	rows, err := db.QueryContext(ctx, `SELECT change_id, dir, scope, type, key, reason, at FROM sync_aside ORDER BY id`)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var a Aside
		var lv scope.Level
		var at int64
		if err := rows.Scan(&a.ChangeID, &a.Dir, &lv, &a.Type, &a.Key, &a.Reason, &at); err != nil {
			rows.Close()
			return st, err
		}
		a.Scope, a.At = lv.String(), time.Unix(0, at).UTC()
		st.Aside = append(st.Aside, a)
	}
	rows.Close()
	st.Conflicts, err = conflicts(ctx, db, `WHERE bucket = ''`)
	return st, err
}

func conflicts(ctx context.Context, db *sql.DB, where string, args ...any) ([]Conflict, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, scope, type, key, winner, loser, at FROM sync_conflicts `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Conflict{}
	for rows.Next() {
		var c Conflict
		var lv scope.Level
		var w, l string
		var at int64
		if err := rows.Scan(&c.ID, &lv, &c.Type, &c.Key, &w, &l, &at); err != nil {
			return nil, err
		}
		json.Unmarshal([]byte(w), &c.Winner)
		json.Unmarshal([]byte(l), &c.Loser)
		c.Scope, c.At = lv.String(), time.Unix(0, at).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

// Print writes st for people.
func (st Status) Print(w io.Writer) {
	fmt.Fprintf(w, "team:      %s (from %s)\n", st.URL, st.From)
	if st.LastSync != nil {
		fmt.Fprintf(w, "last sync: %s\n", st.LastSync.Local().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "last sync: never")
	}
	if st.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", st.LastError)
	}
	fmt.Fprintf(w, "pending:   %d\n", st.Pending)
	fmt.Fprintf(w, "set aside: %d\n", len(st.Aside))
	for _, a := range st.Aside {
		fmt.Fprintf(w, "  %s %s/%s/%s (%s): %s\n", a.Dir, a.Scope, a.Type, a.Key, a.At.Local().Format(time.RFC3339), a.Reason)
	}
	fmt.Fprintf(w, "conflicts: %d\n", len(st.Conflicts))
	for _, c := range st.Conflicts {
		fmt.Fprintf(w, "  #%d %s/%s/%s at %s: this machine's version lost (memory-mcp sync restore %d brings it back)\n",
			c.ID, c.Scope, c.Type, c.Key, c.At.Local().Format(time.RFC3339), c.ID)
		fmt.Fprintf(w, "    kept:  %s\n", bodyLine(c.Winner))
		fmt.Fprintf(w, "    lost:  %s\n", bodyLine(c.Loser))
	}
}

func bodyLine(c team.Change) string {
	if c.Op == team.OpDelete || c.Record == nil {
		return "(deleted)"
	}
	return strings.ReplaceAll(c.Record.Body, "\n", "\n           ")
}

// Restore brings back the version that lost conflict id, as a new local
// write (which is queued, and wins once the server orders it), and drops
// the conflict. Errors: memory.ErrNotFound for no such conflict.
func (s *Syncer) Restore(ctx context.Context, id int64) (Conflict, error) {
	cs, err := conflicts(ctx, s.st.DB(), `WHERE bucket = '' AND id = $1`, id)
	if err != nil {
		return Conflict{}, fmt.Errorf("sync restore: %w", err)
	}
	if len(cs) == 0 {
		return Conflict{}, fmt.Errorf("sync restore: conflict #%d: %w", id, memory.ErrNotFound)
	}
	c := cs[0]
	lv, _ := scope.Parse(c.Scope)
	typ, _ := memory.ParseType("type", c.Type)
	err = s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		if c.Loser.Op == team.OpPut && c.Loser.Record != nil {
			_, _, err = s.st.PutTx(ctx, tx, memory.Project{}, team.WriteOf(lv, typ, c.Key, c.Loser.Record, s.st.Now()))
		} else if _, err = s.st.DeleteTx(ctx, tx, memory.Project{}, lv, typ, c.Key); errors.Is(err, memory.ErrNotFound) {
			err = nil
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM sync_conflicts WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return Conflict{}, fmt.Errorf("sync restore: %w", err)
	}
	return c, nil
}

// Clear forgets the changes set aside and the conflicts, once read (see
// Status): a conflict's lost version is gone with it. It returns how many
// of each it forgot.
func (s *Syncer) Clear(ctx context.Context) (aside, conflicts int, err error) {
	err = s.st.WriteTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM sync_aside`)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		aside = int(n)
		if r, err = tx.ExecContext(ctx, `DELETE FROM sync_conflicts WHERE bucket = ''`); err != nil {
			return err
		}
		n, _ = r.RowsAffected()
		conflicts = int(n)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("sync clear: %w", err)
	}
	return aside, conflicts, nil
}

// Health is one line on sync for doctor: ok, what it found, and what to do
// when it is not ok.
func (s *Syncer) Health(ctx context.Context) (ok bool, detail, fix string) {
	st, err := s.Status(ctx)
	if err != nil {
		return false, "cannot read the sync state: " + err.Error(), "run memory-mcp sync"
	}
	when := "never"
	if st.LastSync != nil {
		when = st.LastSync.Local().Format(time.RFC3339)
	}
	detail = fmt.Sprintf("team %s: last sync %s, %d pending, %d set aside, %d conflicts", st.URL, when, st.Pending, len(st.Aside), len(st.Conflicts))
	switch {
	case st.LastError != "":
		return false, detail + "; last round failed: " + st.LastError, "run memory-mcp sync to see it again; check the URL and the token"
	case st.LastSync == nil:
		return false, detail, "run memory-mcp sync"
	case len(st.Aside) > 0 || len(st.Conflicts) > 0:
		return false, detail, "read memory-mcp sync status, restore what should come back, then memory-mcp sync clear"
	}
	// The last round went well; the server is asked whether it still
	// answers, with a pull of one change that is not applied.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	after, err := s.cursor(ctx, s.st.DB())
	if err == nil {
		var page team.PullResponse
		err = s.c.do1(ctx, http.MethodGet, team.PullPath+"?after="+strconv.FormatInt(after, 10)+"&limit=1", nil, &page)
	}
	if err != nil {
		return false, detail + "; now: " + err.Error(), "check the URL, the network and the token"
	}
	return true, detail, ""
}
