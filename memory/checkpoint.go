package memory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// SQLite copies the write-ahead log back into the database (a checkpoint)
// in whichever commit takes the log past 1,000 pages, and that writer waits
// for the copy and its fsyncs: every hundredth write or so took tens of
// milliseconds. Here commits never checkpoint; a goroutine of each Store
// does, after checkpointEvery of its commits or checkpointIdle after its
// last, without blocking writers or readers (a passive checkpoint). Closing
// the last connection checkpoints whatever is left, as before.
const (
	checkpointEvery = 64
	checkpointIdle  = time.Second
	truncateWait    = 50 * time.Millisecond
	busyTimeout     = 10 * time.Second // as Open's DSN sets it
)

// driverName is mattn's driver with the settings each connection needs
// that a DSN cannot carry.
const driverName = "sqlite3-memory"

// pageSize is the page size of a database this build creates. A write
// changes one leaf page of the table and of each of its indexes and of the
// search and embedding change tables, some 17 pages a note, and the log
// takes each whole: at SQLite's default 4,096 bytes that was 70 KiB of log
// a write, and writing it was most of the commit's kernel time. At 1,024
// bytes it is 25 KiB (BenchmarkPutNew). A database made by an earlier
// build keeps its page size.
const pageSize = 1024

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// The log is reused from its start once checkpointed; past this
		// size it is also cut back, so a burst does not leave it large.
		// The page size applies only to a database not yet created (see
		// pageSize); on any other it changes nothing.
		_, err := c.Exec("PRAGMA page_size = "+strconv.Itoa(pageSize)+"; PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 8388608", nil)
		return err
	}})
}

// checkpointer runs a Store's checkpoints.
type checkpointer struct {
	mu      sync.Mutex
	commits int // since the last checkpoint
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once // stops it
}

func (s *Store) startCheckpoints() {
	s.cp.kick = make(chan struct{}, 1)
	s.cp.stop = make(chan struct{})
	s.cp.done = make(chan struct{})
	go s.checkpointLoop()
}

// committed counts a commit and wakes the checkpointer.
func (s *Store) committed() {
	if s.cp.kick == nil {
		return
	}
	s.cp.mu.Lock()
	s.cp.commits++
	s.cp.mu.Unlock()
	select {
	case s.cp.kick <- struct{}{}:
	default:
	}
}

func (s *Store) checkpointLoop() {
	defer close(s.cp.done)
	idle := time.NewTimer(checkpointIdle)
	idle.Stop()
	// uncut is set while the log holds commits that no truncating
	// checkpoint has cut: a burst whose last commit made a passive
	// checkpoint due still needs the quiet one after it.
	uncut := false
	retry := checkpointIdle
	for {
		quiet := false
		select {
		case <-s.cp.stop:
			return
		case <-s.cp.kick:
			s.cp.mu.Lock()
			due := s.cp.commits >= checkpointEvery
			s.cp.mu.Unlock()
			// retry: a cut that met a reader is not tried again every
			// quiet second while writes go on.
			idle.Reset(retry)
			if !due {
				continue
			}
		case <-idle.C:
			quiet = true
		}
		s.cp.mu.Lock()
		n := s.cp.commits
		s.cp.commits = 0
		s.cp.mu.Unlock()
		if n == 0 && !(quiet && uncut) {
			continue
		}
		uncut = true
		s.background(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if quiet && s.truncateLog(ctx) {
				uncut = false
				retry = checkpointIdle
				return
			}
			if quiet {
				// Someone was in the way: try again later, less often
				// while it stays (each try may hold writers up for
				// truncateWait).
				retry = min(2*retry, 32*checkpointIdle)
				idle.Reset(retry)
			}
			// Passive: it copies what no reader still needs and never
			// waits; what it could not copy goes with the next one.
			s.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		})
	}
}

// truncateLog checkpoints the whole log and cuts it to nothing, when no
// reader or writer is in the way for a moment. With passive checkpoints
// alone the log was never reused from its start here: it grew with every
// page written (30 MiB after 2,400 writes to a 10 MiB database; see
// TestWriteAheadLogStaysSmall). It waits for others
// at most truncateWait, so a long read never holds writers up for long,
// and reports whether the log was cut.
func (s *Store) truncateLog(ctx context.Context) bool {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", truncateWait.Milliseconds())); err != nil {
		return false
	}
	defer func() {
		if _, err := conn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds())); err != nil {
			// A connection left with the short timeout would fail
			// writers early: it goes instead of back to the pool.
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	var busy, logFrames, done int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return false
	}
	return busy == 0
}

func (s *Store) stopCheckpoints() {
	if s.cp.stop == nil {
		return
	}
	s.cp.once.Do(func() {
		close(s.cp.stop)
		<-s.cp.done
	})
}
