package main

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Work lent a processor runs with one more than the limit, however many
// such works overlap, and the limit comes back when the last one ends;
// without a limit, lending changes nothing.
func TestProcessorsLend(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var p processors
	before := runtime.GOMAXPROCS(0)
	p.lend(func() {
		if n := runtime.GOMAXPROCS(0); n != before {
			t.Errorf("unlimited: lending made %d processors of %d", n, before)
		}
	})

	p.limit(1)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("limited to 1: %d processors", n)
	}
	var wg sync.WaitGroup
	hold := make(chan struct{})
	started := make(chan struct{}, 8)
	for range 8 {
		wg.Go(func() {
			p.lend(func() {
				if n := runtime.GOMAXPROCS(0); n != 2 {
					t.Errorf("lent work runs on %d processors, want 2", n)
				}
				started <- struct{}{}
				<-hold
			})
		})
	}
	for range 8 {
		<-started
	}
	// A limit set while work is lent keeps the loan.
	p.limit(1)
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("limit during a loan: %d processors, want 2", n)
	}
	close(hold)
	wg.Wait()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("after the loans: %d processors, want 1", n)
	}
}

// A call waiting in SQLite for another process's write lock holds the
// stdio server's one processor in C: a read and a ping sent after it are
// still answered while it waits, and the write is saved once the lock is
// let go.
func TestCallsGoOnWhileAWriteWaitsForTheLock(t *testing.T) {
	e := newEnv(t)
	cs := connect(t, e, nil)
	ok(t, cs, "memory_write", map[string]any{"type": "working", "key": "before", "body": "written first"})

	db, err := sql.Open("sqlite3", "file:"+e.db+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	locked := true
	defer func() {
		if locked {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()

	order := make(chan string, 3)
	written := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory_write",
			Arguments: map[string]any{"type": "working", "key": "waits", "body": "written once the lock goes"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("%s", text(res))
		}
		order <- "write"
		written <- err
	}()
	// The write is on its way into SQLite's busy wait; what comes after
	// it must not wait for it.
	time.Sleep(200 * time.Millisecond)
	if got := ok(t, cs, "memory_read", map[string]any{"key": "before", "type": "working"}); got["record"].(map[string]any)["body"] != "written first" {
		t.Errorf("read during the wait: %v", got)
	}
	order <- "read"
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	order <- "ping"
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	locked = false
	if err := <-written; err != nil {
		t.Fatalf("the write that waited: %v", err)
	}
	if first, second := <-order, <-order; first != "read" || second != "ping" {
		t.Errorf("answered in the order %s, %s, write: the read and the ping waited for the write", first, second)
	}
	if got := ok(t, cs, "memory_read", map[string]any{"key": "waits", "type": "working"}); got["record"].(map[string]any)["body"] != "written once the lock goes" {
		t.Errorf("the write that waited was not saved: %v", got)
	}
}

// BenchmarkLend is what lending a processor costs a piece of background
// work: two changes of GOMAXPROCS, each stopping the world.
func BenchmarkLend(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var p processors
	p.limit(1)
	for b.Loop() {
		p.lend(func() {})
	}
}
