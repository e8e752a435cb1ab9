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

// TestOneMallocArena: in a fresh process with neither MALLOC_ARENA_MAX
// nor GLIBC_TUNABLES set, glibc has one arena after eight threads at once
// each worked a SQLite database of their own; with either set, the limit
// is glibc's and the process has more (the control: the test proves
// nothing if the threads would share one anyway).
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
			// LD_PRELOAD: another allocator would leave glibc's one arena.
			if !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") && !strings.HasPrefix(kv, "GLIBC_TUNABLES=") && !strings.HasPrefix(kv, "LD_PRELOAD=") {
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
		t.Errorf("with neither variable: limited %v, %d arenas, %d made meanwhile; want true, 1, 0", limited, arenas, made)
	}
	if limited, arenas, _ := run("MALLOC_ARENA_MAX=64"); limited || arenas < 2 {
		t.Errorf("with MALLOC_ARENA_MAX=64: limited %v, %d arenas; want false and more than one", limited, arenas)
	}
	if limited, arenas, _ := run("GLIBC_TUNABLES=glibc.malloc.arena_max=64"); limited || arenas < 2 {
		t.Errorf("with the arena_max tunable: limited %v, %d arenas; want false and more than one", limited, arenas)
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
