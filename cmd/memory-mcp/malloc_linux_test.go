//go:build linux && cgo

package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// arenasChild, set in a child test process, makes it run SQLite on eight
// threads at once and print how many arenas the C allocator has then and
// how many it made for them.
const arenasChild = "MEMORY_MCP_TEST_ARENAS"

// TestOneMallocArena: in a fresh process, started as an agent starts the
// server, glibc has one arena, and eight new threads each working a
// SQLite database of their own make no other; with MALLOC_ARENA_MAX set,
// the limit is glibc's and the same threads make more (the control: the
// test proves nothing if they would share one anyway).
func TestOneMallocArena(t *testing.T) {
	if os.Getenv(arenasChild) != "" {
		arenasInChild(t)
		return
	}
	if mallocArenas() < 1 {
		t.Skip("the C allocator is not glibc's")
	}
	run := func(env ...string) (limited bool, arenas, made int) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestOneMallocArena$", "-test.v")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") && !strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, append(env, arenasChild+"=1", "MEMORY_MCP_TEST_DIR="+t.TempDir())...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %v: %v\n%s", env, err, out)
		}
		_, line, found := strings.Cut(string(out), "limited=")
		if !found {
			t.Fatalf("child %v printed no count:\n%s", env, out)
		}
		var l int
		if _, err := fmt.Sscanf(line, "%d arenas=%d made=%d", &l, &arenas, &made); err != nil {
			t.Fatalf("child %v: %v in %q", env, err, line)
		}
		return l == 1, arenas, made
	}
	if limited, arenas, made := run(); !limited || arenas != 1 || made != 0 {
		t.Errorf("as started by an agent: limited %v, %d arenas, %d made by the threads; want true, 1, 0", limited, arenas, made)
	}
	if limited, _, made := run("MALLOC_ARENA_MAX=64"); limited || made < 1 {
		t.Errorf("with MALLOC_ARENA_MAX=64: limited %v, %d arenas made by the threads; want false and some", limited, made)
	}
	if limited, _, made := run("GLIBC_TUNABLES=glibc.malloc.arena_max=64"); limited || made < 1 {
		t.Errorf("with the arena_max tunable: limited %v, %d arenas made by the threads; want false and some", limited, made)
	}
}

func arenasInChild(t *testing.T) {
	dir := os.Getenv("MEMORY_MCP_TEST_DIR")
	before := mallocArenas()
	var start, done sync.WaitGroup
	start.Add(8)
	errs := make(chan error, 8)
	for i := range 8 {
		done.Add(1)
		go func() {
			defer done.Done()
			// Each on a thread of its own: all eight hold theirs at once.
			runtime.LockOSThread()
			start.Done()
			start.Wait()
			errs <- sqliteWork(filepath.Join(dir, fmt.Sprintf("%d.db", i)))
		}()
	}
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	limited := 0
	if oneMallocArena() {
		limited = 1
	}
	after := mallocArenas()
	fmt.Printf("limited=%d arenas=%d made=%d\n", limited, after, after-before)
}

// sqliteWork makes a database and writes to it, allocating through the C
// allocator on the calling thread.
func sqliteWork(path string) error {
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		return err
	}
	for i := range 200 {
		if _, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, strings.Repeat("x", 100+i)); err != nil {
			return err
		}
	}
	return nil
}
