package memory

import (
	"context"
	"database/sql"
	"errors"

	"prom.codes/memory-mcp/scope"
)

// A process that writes a fact reads back, on its next call, the one row
// its own write changed (MirrorChangesSince, a query costing a call some
// 25 µs), and after a note, that nothing changed. ownPut spares that read
// when the write's own commit is all that happened since the last one:
//
//   - a Put or an Update (putAlone) arms it inside its transaction,
//     holding the write lock, so no other process can commit: the change
//     token then (t0) is the one the last read left (seen at version v0),
//     or nothing is done;
//   - each file state the write records is noted;
//   - before the commit, the project's version is read back: it must be
//     v0 plus one for each state noted (the triggers add one for each row
//     changed), or some other change was made and nothing is done;
//   - after the commit, the token is read again (t1): its commit counter
//     (the log index header's iChange, which every commit of any process
//     adds one to, and nothing else adds to; a rebuilt index starts it
//     again from 0) must be t0's plus one, so the commit was this one
//     alone. Then the state at t1 is v0's with the states noted written
//     over it, and MirrorChangesSince answers from it.
//
// Where any of this cannot be told (PostgreSQL, no readable log index, a
// state noted for another project) MirrorChangesSince reads as before.
type ownPut struct {
	armed  bool
	p      scope.Identity
	t0     changeToken
	v0, v1 int64
	states []FileState
	spoilt bool // a state of another project, or a version that did not add up
}

// iChange is the word of the log index header that counts commits.
const iChange = 2

// armOwnPut starts an ownPut for p in the write transaction under way.
func (s *Store) armOwnPut(ctx context.Context, p scope.Identity) {
	s.ownPut = ownPut{}
	if s.pg {
		return
	}
	t0, known := s.changeToken(ctx)
	if !known || t0[iChange] == ^uint32(0) {
		return
	}
	v0 := s.seen.at(p, t0)
	if v0 < 0 {
		return
	}
	s.ownPut = ownPut{armed: true, p: p, t0: t0, v0: v0}
}

// noteOwnState notes a file state recorded for p by the write under way.
func (s *Store) noteOwnState(p scope.Identity, st FileState) {
	o := &s.ownPut
	if !o.armed {
		return
	}
	if p != o.p {
		o.spoilt = true
		return
	}
	o.states = append(o.states, st)
}

// checkOwnPut reads p's version back before the commit of the write
// under way; it spoils the ownPut if the version did not move by one for
// each state noted.
func (s *Store) checkOwnPut(ctx context.Context, tx *sql.Tx) {
	o := &s.ownPut
	if !o.armed || o.spoilt {
		return
	}
	err := tx.QueryRowContext(ctx, `SELECT version FROM mirror_versions WHERE project = ?`, string(o.p)).Scan(&o.v1)
	if errors.Is(err, sql.ErrNoRows) {
		o.v1, err = 0, nil
	}
	if err != nil || o.v1 != o.v0+int64(len(o.states)) {
		o.spoilt = true
	}
}

// ownPutCommitted records the state the committed write left, if its
// commit was the only one since it was armed.
func (s *Store) ownPutCommitted(ctx context.Context) {
	o := s.ownPut
	s.ownPut = ownPut{}
	if !o.armed || o.spoilt {
		return
	}
	t1, known := s.changeToken(ctx)
	if !known || t1[iChange] != o.t0[iChange]+1 {
		return
	}
	if len(o.states) == 0 {
		s.seen.set(o.p, t1, o.v0)
		return
	}
	s.seen.put(o.p, seenVersion{token: t1, version: o.v1, ahead: true, from: o.v0, states: o.states})
}

// setFileState is the package's setFileState for a Put or an Update: it
// notes the state recorded for the write's ownPut.
func (s *Store) setFileState(ctx context.Context, tx *sql.Tx, p scope.Identity, st FileState) error {
	if err := setFileState(ctx, tx, p, st); err != nil {
		return err
	}
	s.noteOwnState(p, storedState(st))
	return nil
}
