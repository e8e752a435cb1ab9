package memory

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// Uses (use_count, last_accessed_at) are counted in memory and written
// later, so that a read is a read: writing them at once made every read a
// write transaction, which under several processes also waited for the
// write lock. They reach the database
//   - with the next write transaction of this process, whatever it is;
//   - before this process reads anything ordered or shown by them (List,
//     Effective, Index);
//   - within touchDelay, on a timer;
//   - when the Store is closed.
//
// A process that dies without closing its Store loses at most touchDelay
// of uses. Each process adds its own counts to the stored ones, so the
// counts of several processes add up.
const touchDelay = time.Second

// touch is the uses of one record not yet written.
type touch struct {
	n  int64
	at int64 // latest access, Unix nanoseconds
}

// touches is a Store's uses not yet written.
type touches struct {
	mu      sync.Mutex
	pending map[string]touch
	timer   *time.Timer
	closed  bool
}

// note counts one use at t of each record in ids, and returns the uses of
// ids[0] not yet written, this one included.
func (s *Store) note(ids []string, t time.Time) int64 {
	at := t.UnixNano()
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	if s.uses.pending == nil {
		s.uses.pending = map[string]touch{}
	}
	for _, id := range ids {
		u := s.uses.pending[id]
		u.n++
		u.at = max(u.at, at)
		s.uses.pending[id] = u
	}
	if s.uses.timer == nil && !s.uses.closed {
		s.uses.timer = time.AfterFunc(touchDelay, s.flushLater)
	}
	if len(ids) == 0 {
		return 0
	}
	return s.uses.pending[ids[0]].n
}

// take removes the pending uses and returns them.
func (s *Store) take() map[string]touch {
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	p := s.uses.pending
	s.uses.pending = nil
	return p
}

// giveBack returns uses that could not be written to the pending ones.
func (s *Store) giveBack(p map[string]touch) {
	if len(p) == 0 {
		return
	}
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	if s.uses.pending == nil {
		s.uses.pending = map[string]touch{}
	}
	for id, u := range p {
		v := s.uses.pending[id]
		v.n += u.n
		v.at = max(v.at, u.at)
		s.uses.pending[id] = v
	}
	if s.uses.timer == nil && !s.uses.closed {
		s.uses.timer = time.AfterFunc(touchDelay, s.flushLater)
	}
}

func (s *Store) hasPending() bool {
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	return len(s.uses.pending) > 0
}

// writeUses adds uses to the stored counts within tx, in one statement
// whatever their number: on PostgreSQL each statement is a round trip.
func (s *Store) writeUses(ctx context.Context, tx *sql.Tx, uses map[string]touch) error {
	if len(uses) == 0 {
		return nil
	}
	rows := make([][3]any, 0, len(uses))
	for id, u := range uses {
		rows = append(rows, [3]any{id, u.n, u.at})
	}
	param, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE records SET use_count = use_count + u.n,
		last_accessed_at = `+s.greatest("coalesce(last_accessed_at, 0)", "u.at")+`
		FROM `+s.usesRows("$1")+` WHERE records.id = u.id`, string(param))
	return err
}

// flushLater is the timer's flush.
func (s *Store) flushLater() {
	s.uses.mu.Lock()
	s.uses.timer = nil
	closed := s.uses.closed
	s.uses.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Flush(ctx) // on failure the uses stay pending and the timer is set again
}

// Flush writes the uses counted by this process and not yet written.
// Reads that order or show by use do it themselves; the command line and
// tests call it to see counts at once.
func (s *Store) Flush(ctx context.Context) error {
	if !s.hasPending() {
		return nil
	}
	// An empty transaction: every write transaction writes the pending
	// uses first.
	return s.tx(ctx, func(*sql.Tx) error { return nil })
}

// flushForRead writes pending uses before a read that orders or shows by
// them. A failure (the write lock held elsewhere beyond the busy timeout)
// leaves them pending and the read goes on with the counts stored: the
// uses are not lost, and a read must not fail for bookkeeping.
func (s *Store) flushForRead(ctx context.Context) {
	_ = s.Flush(ctx)
}

// withPending adds to rec the uses of it this process has not written yet.
func (s *Store) withPending(rec *Record) {
	s.uses.mu.Lock()
	u, ok := s.uses.pending[rec.ID]
	s.uses.mu.Unlock()
	if !ok {
		return
	}
	rec.UseCount += u.n
	if at := time.Unix(0, u.at).UTC(); rec.LastAccessedAt == nil || rec.LastAccessedAt.Before(at) {
		rec.LastAccessedAt = &at
	}
}
