package memory

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/scope"
)

// TestOpenAdvises checks that Open, on a path it cannot use, names the
// path, says what to do, and changes nothing there.
func TestOpenAdvises(t *testing.T) {
	bg := context.Background()
	good := filepath.Join(t.TempDir(), "good.db")
	s, err := openTarget(bg, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	header, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	header = header[:4096]

	cases := []struct {
		name   string
		setup  func(t *testing.T, dir string) (path, keep string)
		advice []string
	}{
		{"garbage", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "memory.db")
			os.WriteFile(p, bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096), 0o600)
			return p, p
		}, []string{"move it aside", "left untouched", "PROMETHEUS_MEMORY_DB_PATH"}},
		{"SQLite header, junk after", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "memory.db")
			os.WriteFile(p, append(append([]byte{}, header...), bytes.Repeat([]byte("junk"), 4096)...), 0o600)
			return p, p
		}, []string{"move it aside", "PROMETHEUS_MEMORY_DB_PATH"}},
		{"path is a directory", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "memory.db")
			os.Mkdir(p, 0o700)
			os.WriteFile(filepath.Join(p, "keep"), []byte("keep"), 0o600)
			return p, filepath.Join(p, "keep")
		}, []string{"is a directory", "must name a file"}},
		{"parent is a file", func(t *testing.T, dir string) (string, string) {
			f := filepath.Join(dir, "file")
			os.WriteFile(f, []byte("a file"), 0o600)
			return filepath.Join(f, "memory.db"), f
		}, []string{"not a directory", "move that file", "PROMETHEUS_MEMORY_DB_PATH"}},
		{"grandparent is a file", func(t *testing.T, dir string) (string, string) {
			f := filepath.Join(dir, "file")
			os.WriteFile(f, []byte("a file"), 0o600)
			return filepath.Join(f, "a", "b", "memory.db"), f
		}, []string{"not a directory", "move that file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path, keep := c.setup(t, dir)
			before, _ := os.ReadFile(keep)
			_, err := openTarget(bg, path, nil)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, filepath.Dir(keep)) {
				t.Errorf("%q does not name the path", msg)
			}
			for _, a := range c.advice {
				if !strings.Contains(msg, a) {
					t.Errorf("%q lacks %q", msg, a)
				}
			}
			if strings.Count(msg, "PROMETHEUS_MEMORY_DB_PATH") > 1 {
				t.Errorf("advice given twice: %q", msg)
			}
			if after, _ := os.ReadFile(keep); !bytes.Equal(before, after) {
				t.Errorf("%s changed", keep)
			}
			for _, s := range []string{"-wal", "-shm", "-journal"} {
				if _, err := os.Stat(path + s); err == nil {
					t.Errorf("%s left beside the refused path", filepath.Base(path+s))
				}
			}
		})
	}
}

// TestOpenAtOnce opens one fresh database from many stores at the same
// moment, as several server processes starting together would, round after
// round: every Open succeeds and the schema is migrated once.
func TestOpenAtOnce(t *testing.T) {
	bg := context.Background()
	rounds := 10
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "sub", "memory.db")
		gate := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				s, err := openTarget(bg, path, nil)
				if err != nil {
					errs[i] = err
					return
				}
				s.Close()
			}()
		}
		close(gate)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, opener %d: %v", round, i, err)
			}
		}
		s, err := openTarget(bg, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v int
		s.db.QueryRow("PRAGMA user_version").Scan(&v)
		var check string
		s.db.QueryRow("PRAGMA integrity_check").Scan(&check)
		s.Close()
		if v != SchemaVersion() || check != "ok" {
			t.Fatalf("round %d: schema version %d (want %d), integrity %q", round, v, SchemaVersion(), check)
		}
	}
}

// TestSearchWhileAnotherDeletes searches from one store while another (a
// second process) writes and deletes matching records: a record deleted
// between the match and the fetch of its row must drop out of the results,
// not fail the search.
func TestSearchWhileAnotherDeletes(t *testing.T) {
	bg := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	a, err := openTarget(bg, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openTarget(bg, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := Project{ID: scope.IdentityOf("/search/race")}
	for i := range 20 {
		if _, _, err := a.Put(bg, p, Write{Type: Semantic, Key: fmt.Sprintf("stable-%d", i), Body: "zebra crossing rules"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			k := fmt.Sprintf("churn-%d", i%10)
			if _, _, err := a.Put(bg, p, Write{Type: Semantic, Key: k, Body: "zebra zebra churn"}); err != nil {
				t.Error(err)
				return
			}
			if _, err := a.Delete(bg, p, Selector{Key: k}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	searches, failures := 0, 0
	var first error
	for time.Now().Before(deadline) {
		searches++
		if _, err := b.Search(bg, p.ID, SearchOptions{Query: "zebra", Limit: 30}); err != nil {
			failures++
			if first == nil {
				first = err
			}
		}
	}
	close(done)
	wg.Wait()
	if failures > 0 {
		// Fix: Search skips a row that is gone, or no longer its project's,
		// when it fetches the hits (see the report).
		regressed(t, "%d of %d searches failed while another store deleted matches; first: %q", failures, searches, first)
	}
}

// regressed fails a test that has shown the symptom of a race fixed
// once already (a sync deleting a record whose file was just written, a
// search failing on a match deleted meanwhile).
func regressed(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Errorf("regression: "+format, args...)
}
