package memory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"prom.codes/memory-mcp/scope"
)

// Store keeps records in a Backend: one SQLite database shared by every
// server process on the machine, or one PostgreSQL database shared by the
// replicas of a team server. It is safe for concurrent use.
type Store struct {
	b    Backend
	db   *sql.DB // b's
	path string  // the file, or the URL without its password
	pg   bool    // PostgreSQL rather than SQLite
	now  func() time.Time

	// writing admits one write transaction of this process at a time.
	// SQLite would serialize them anyway, but a writer that finds the
	// lock taken sleeps in the busy handler for a millisecond or more;
	// waiting here wakes it the moment the other commits. Other
	// processes still meet the busy timeout.
	writing chan struct{}
	// fileUndo takes back the mirror's file operations of the write
	// transaction under way (there is one at a time) if it does not
	// commit. See undoFiles.
	fileUndo []func()
	// afterCommit, when set (by tests), runs right after a write
	// transaction commits, before anything the Store does about it.
	afterCommit func()

	idMu   sync.Mutex
	lastID [16]byte

	countMu sync.Mutex
	counts  map[countKey]count // see Count

	search searchIndex // see Search
	uses   touches     // see touch.go
}

// Options adjust how a Store is opened.
type Options struct {
	// Now is the clock; nil means time.Now. Tests inject their own.
	Now func() time.Time
}

// DefaultPath is where the database lives when PROMETHEUS_MEMORY_DB_PATH is
// not set: ~/.prometheus/memory.db.
func DefaultPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("home directory: %w", err)
	}
	return filepath.Join(home, ".prometheus", "memory.db"), nil
}

// New returns a Store over b, which it closes with the Store, and purges
// expired records. b is what memory/sqlite's or memory/postgres's Open
// returned: it has migrated the database already.
func New(ctx context.Context, b Backend, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{b: b, db: b.DB(), path: b.Path(), pg: b.Name() == "postgres", now: now, writing: make(chan struct{}, 1)}
	s.search.inIDs = s.inIDs
	if _, err := s.Purge(ctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("open database %s: %w", s.path, err)
	}
	return s, nil
}

// Path returns the database file's path, or the PostgreSQL URL without
// its password.
func (s *Store) Path() string { return s.path }

// Close writes the uses not yet written (see Flush) and closes the
// database.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ferr := s.Flush(ctx)
	s.uses.mu.Lock()
	s.uses.closed = true
	if s.uses.timer != nil {
		s.uses.timer.Stop()
		s.uses.timer = nil
	}
	s.uses.mu.Unlock()
	if err := s.b.Close(); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("write uses: %w", ferr)
	}
	return nil
}

// newID returns a ULID: 48 bits of milliseconds and 80 random bits, in
// Crockford base32, monotonic within one process.
func (s *Store) newID() string {
	var b [16]byte
	ms := uint64(s.now().UnixMilli())
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	s.idMu.Lock()
	if string(b[:6]) == string(s.lastID[:6]) {
		// Same millisecond: count up from the last id so ids sort by creation.
		b = s.lastID
		for i := 15; i >= 6; i-- {
			b[i]++
			if b[i] != 0 {
				break
			}
		}
	}
	s.lastID = b
	s.idMu.Unlock()
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// Purge deletes records whose expiry has passed and reports how many. It
// leaves mirrored project records, whose markdown files must go with them:
// PurgeMirrored deletes those, file and all, for the project whose files it
// can reach. Reads hide all of them the moment they expire.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	const expired = `expires_at IS NOT NULL AND expires_at <= $1 AND NOT (scope = 0 AND type IN ('semantic', 'procedural'))`
	now, err := s.b.Clock(ctx, s.now().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	// Most opens find nothing to purge: look before taking the write lock.
	var any bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM records WHERE `+expired+`)`, now).Scan(&any); err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	if !any {
		return 0, nil
	}
	var n int64
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM records WHERE `+expired, now)
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// PurgeMirrored deletes project p's expired facts and procedures and their
// markdown files, and reports how many.
func (s *Store) PurgeMirrored(ctx context.Context, p Project) (int, error) {
	now, err := s.b.Clock(ctx, s.now().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	var any bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM records WHERE project = $1 AND scope = 0
		AND type IN ('semantic', 'procedural') AND expires_at IS NOT NULL AND expires_at <= $2)`, string(p.ID), now).Scan(&any); err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	if !any {
		return 0, nil
	}
	var n int
	err = s.tx(ctx, func(tx *sql.Tx) error {
		recs, err := queryRecords(ctx, tx, `SELECT `+cols+` FROM records r WHERE r.project = $1 AND r.scope = 0
			AND r.type IN ('semantic', 'procedural') AND r.expires_at IS NOT NULL AND r.expires_at <= $2`, string(p.ID), now)
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		for _, r := range recs {
			if err := s.remove(ctx, tx, p, r, true); errors.Is(err, ErrConflict) {
				// Its file was edited by hand since: keep both; a sync
				// imports the edit, which brings the record back.
				continue
			} else if err != nil {
				return fmt.Errorf("purge %s: %w", r.Key, err)
			}
			n++
		}
		return nil
	})
	return n, err
}

func nanos(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := time.Unix(0, n.Int64).UTC()
	return &t
}

// bucket is the partition a record of level l lives in (see Bucket).
func bucket(p string, scopeLevel int) string {
	return Bucket(scope.Identity(p), scope.Level(scopeLevel))
}

// joinKeys is for error messages listing several types.
func joinTypes(ts []Type) string {
	ss := make([]string, len(ts))
	for i, t := range ts {
		ss[i] = string(t)
	}
	return strings.Join(ss, ", ")
}
