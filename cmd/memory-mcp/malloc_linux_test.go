//go:build linux && cgo

package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// arenasChild, set in a child test process, makes it run SQLite on eight
// threads at once and print how many arenas the C allocator made for
// them; "one" first limits the arenas as the stdio server does.
const arenasChild = "MEMORY_MCP_TEST_ARENAS"

// TestOneMallocArena: in a fresh process, eight new threads each working
// a SQLite database of their own make glibc no new arena after
// oneMallocArena, and more without it (the control: the test proves
// nothing if they would share the old ones anyway). Threads that
// allocated before keep theirs: the runtime's, which allocate only to
// start another. A set MALLOC_ARENA_MAX is left to glibc.
func TestOneMallocArena(t *testing.T) {
	if mode := os.Getenv(arenasChild); mode != "" {
		arenasInChild(t, mode)
		return
	}
	if mallocArenas() < 1 {
		t.Skip("the C allocator is not glibc's")
	}
	count := func(mode string) int {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestOneMallocArena$", "-test.v")
		cmd.Env = append(os.Environ(), arenasChild+"="+mode, "MEMORY_MCP_TEST_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %s: %v\n%s", mode, err, out)
		}
		_, after, found := strings.Cut(string(out), "new arenas=")
		if !found {
			t.Fatalf("child %s printed no count:\n%s", mode, out)
		}
		n, err := strconv.Atoi(strings.Fields(after)[0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("one"); n != 0 {
		t.Errorf("after oneMallocArena the threads made %d arenas, want none", n)
	}
	if n := count("default"); n < 1 {
		t.Errorf("without it they made %d; they shared the old ones anyway, so the check above proves nothing", n)
	}
	if oneMallocArena(func(k string) string {
		if k == "MALLOC_ARENA_MAX" {
			return "4"
		}
		return ""
	}) {
		t.Error("limited the arenas although MALLOC_ARENA_MAX was set")
	}
}

func arenasInChild(t *testing.T, mode string) {
	if mode == "one" && !oneMallocArena(func(string) string { return "" }) {
		t.Fatal("mallopt refused")
	}
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
	fmt.Printf("new arenas=%d\n", mallocArenas()-before)
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
