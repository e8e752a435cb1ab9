package memory

import (
	"context"
	"database/sql"
	"sync"
)

// Nearly every tool call asks the store what changed since the last one
// (the mirror's state, the search index's change sequence) and finds
// nothing. Each such query cost a call some 15-20 µs, and a connection's
// PRAGMA data_version, the number SQLite offers to tell, costs as much:
// most of a statement's cost in a server is the statement, not its work.
//
// SQLite in WAL mode publishes every commit, of any connection in any
// process, by rewriting the header of the write-ahead log's index, which
// every connection maps from the -shm file beside the database: its
// change counter, frame count and checksums. The Store reads that header
// through one connection's own mapping (see walHeader) with plain loads;
// a header that has not moved since a query began means nothing was
// committed after it began, so the query's answer still holds. Where the
// header cannot be read (PostgreSQL, a build without cgo, a header being
// rewritten at that moment) the caller asks the database as before.

// changeToken is the log index header as one commit left it.
type changeToken [walHdrWords]uint32

// walHdrWords is the length in 32-bit words of one copy of the header;
// SQLite keeps two, writing the second first, so that a reader finding
// them equal knows it read a whole one.
const walHdrWords = 12

// walWatch is a Store's view of the log index header.
type walWatch struct {
	mu     sync.RWMutex // read-held while reading hdr, write-held to set it up or end it
	conn   *sql.Conn    // keeps this process's hold on the -shm file (see start)
	hdr    walHeader    // zero until started, or when it cannot be read
	tried  bool
	closed bool
}

// changeToken returns the log index header as it is now, and true; or
// false when it cannot tell, and the caller must look. Read it before the
// query whose answer it vouches for: while it has not moved, nothing was
// committed after that query began.
func (s *Store) changeToken(ctx context.Context) (changeToken, bool) {
	if s.pg {
		return changeToken{}, false
	}
	w := &s.wal
	w.mu.RLock()
	if w.tried {
		defer w.mu.RUnlock()
		if w.hdr == (walHeader{}) {
			return changeToken{}, false
		}
		return w.hdr.read()
	}
	w.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.tried && !w.closed {
		w.start(ctx, s.db)
	}
	if w.hdr == (walHeader{}) {
		return changeToken{}, false
	}
	return w.hdr.read()
}

// start finds the header in the log index as the watching connection
// maps it; the mapping is SQLite's and lives while conn is open. If it
// cannot start, it is not tried again. w.mu must be write-held.
func (w *walWatch) start(ctx context.Context, db *sql.DB) {
	w.tried = true
	conn, err := db.Conn(ctx)
	if err != nil {
		w.tried = false // a cancelled ctx, maybe: try again next time
		return
	}
	// A read transaction opens (and if need be builds) the -shm file.
	var mode string
	var v int64
	err = conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
	if err == nil {
		err = conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	}
	if err != nil || mode != "wal" {
		conn.Close()
		if err != nil && ctx.Err() != nil {
			w.tried = false
		}
		return
	}
	hdr, err := logIndexOf(conn)
	if err != nil {
		conn.Close()
		return
	}
	w.conn, w.hdr = conn, hdr
}

// close ends the mapping and lets go of the connection, before the
// database closes.
func (w *walWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed, w.tried = true, true
	w.hdr = walHeader{}
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// versioned remembers the answer of a query about what changed, with the
// change token read before the query began.
type versioned[T any] struct {
	mu    sync.Mutex
	token changeToken
	ok    bool
	val   T
}

// get returns the answer remembered at token, if any.
func (v *versioned[T]) get(token changeToken, known bool) (T, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !known || !v.ok || v.token != token {
		var zero T
		return zero, false
	}
	return v.val, true
}

// set remembers val, read by a query that began after token was read.
// Answers set out of order are each right at their own token.
func (v *versioned[T]) set(token changeToken, known bool, val T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.token, v.ok, v.val = token, known, val
}

// read returns the answer remembered at the token tok gives now, or else
// asks query and remembers its answer at that token. A nil tok never
// knows: query is asked every time.
func (v *versioned[T]) read(ctx context.Context, tok func(context.Context) (changeToken, bool), query func() (T, error)) (T, error) {
	var token changeToken
	var known bool
	if tok != nil {
		token, known = tok(ctx)
	}
	if val, ok := v.get(token, known); ok {
		return val, nil
	}
	val, err := query()
	if err != nil {
		return val, err
	}
	v.set(token, known, val)
	return val, nil
}
