package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// driverName is go-sqlite3's driver with the settings each connection
// needs that a DSN cannot carry:
//   - page_size: a database this build creates gets 1 KiB pages. A write
//     changes a leaf page of the records table, of each of its indexes
//     and of the change tables, and the write-ahead log takes each page
//     whole, so smaller pages mean a smaller log per write. A database
//     made with other pages keeps them.
//   - wal_autocheckpoint=0: a commit never copies the log back into the
//     database itself (which made the writer whose commit crossed the
//     threshold wait for the copy and its fsyncs); the store's own
//     goroutine does it, below.
const driverName = "sqlite3-memory"

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec("PRAGMA page_size = 1024; PRAGMA wal_autocheckpoint = 0", nil)
		return err
	}})
}

// Checkpoints: after checkpointEvery commits of this process, or a
// second after its last, a passive checkpoint copies the log back into
// the database without blocking readers or writers. SQLite restarts the
// log from its start once a checkpoint has copied all of it, so it stays
// small; closing the store checkpoints what it left.
const (
	checkpointEvery = 64
	checkpointIdle  = time.Second
)

// checkpoints runs one pool's checkpoints.
type checkpoints struct {
	db      *sql.DB
	mu      sync.Mutex
	commits int // since the last checkpoint
	kick    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func startCheckpoints(db *sql.DB) *checkpoints {
	c := &checkpoints{db: db, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c
}

// committed counts a commit and wakes the loop.
func (c *checkpoints) committed() {
	c.mu.Lock()
	c.commits++
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpoints) loop() {
	idle := time.NewTimer(checkpointIdle)
	idle.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.kick:
			idle.Reset(checkpointIdle)
			c.mu.Lock()
			due := c.commits >= checkpointEvery
			c.mu.Unlock()
			if !due {
				continue
			}
		case <-idle.C:
		}
		c.mu.Lock()
		n := c.commits
		c.commits = 0
		c.mu.Unlock()
		if n == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// A checkpoint that meets a busy database is simply tried again
		// after the next commits.
		c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		cancel()
	}
}

// stop ends the loop, and copies back what this process committed since
// the last checkpoint: the pool closing is the last connection only when
// no other process has the database open, so a short-lived process beside
// a running server would otherwise leave its commits in the log.
func (c *checkpoints) stop() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		close(c.done)
		c.mu.Lock()
		n := c.commits
		c.mu.Unlock()
		if n > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
			cancel()
		}
	})
}
