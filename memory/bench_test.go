package memory

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
	"prom.codes/memory-mcp/scope"
)

// The benchmarks measure every hot path of the store at three sizes. Each
// size's database is built once per test binary, with records of realistic
// text (see benchWrite), and reused: read-only benchmarks open the cached
// file itself, writing ones a copy in b.TempDir. With -short the largest size
// is skipped, so `go test -short -bench .` stays quick. Compare runs with
// benchstat.

// benchSizes are the record counts every hot path is measured at.
var benchSizes = []int{1_000, 10_000, 100_000}

// benchSeed fixes the records' names and text, so runs compare.
const benchSeed = 1

// benchCache holds one populated database per size, built on first use and
// removed by TestMain.
var benchCache = struct {
	sync.Mutex
	dir   string
	paths map[int]string
}{paths: map[int]string{}}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchCache.dir != "" {
		os.RemoveAll(benchCache.dir)
	}
	os.Exit(code)
}

// benchProjects are the workspaces of the records: most project records are
// the benchmarked workspace's, the rest another's, as in a database that
// several repositories share.
var benchProjects = [2]Project{
	{ID: scope.IdentityOf("/bench/workspace")},
	{ID: scope.IdentityOf("/bench/other")},
}

// benchName is record i's project, scope, type and key; it depends on i
// alone, so a benchmark can address any record of the cached databases
// without them. Of the records, 85% are project-scoped (one in eight of
// those in the other workspace), 10% system and 5% workspace; 35% are
// semantic, 15% procedural, 30% episodic and 20% working.
func benchName(i int) (Project, scope.Level, Type, string) {
	h := corpus.Mix(benchSeed, i)
	p, lvl := benchProjects[0], scope.Project
	switch s := h % 100; {
	case s < 10:
		lvl = scope.System
	case s < 15:
		lvl = scope.Workspace
	case s < 26:
		p = benchProjects[1]
	}
	var t Type
	switch u := (h >> 8) % 100; {
	case u < 35:
		t = Semantic
	case u < 50:
		t = Procedural
	case u < 80:
		t = Episodic
	default:
		t = Working
	}
	return p, lvl, t, corpus.TermAt((h>>16)%1000) + "-" + corpus.TermAt(h>>32) + "-" + strconv.Itoa(i)
}

// benchWrite is record i with fresh text from c: realistic prose (see
// package corpus) of the length typical for its type.
func benchWrite(c *corpus.Corpus, i int) (Project, Write) {
	p, lvl, t, key := benchName(i)
	w := Write{Scope: lvl, Type: t, Key: key, Description: c.Description(), Source: FromTool}
	switch t {
	case Semantic:
		w.Body = c.Text(15 + c.Intn(45))
		conf := 0.3 + float64(c.Intn(66))/100
		w.Confidence = &conf
	case Procedural:
		w.Body = c.Steps(30 + c.Intn(90))
	case Episodic:
		w.Body = c.Text(60 + c.Intn(190))
		w.SessionID = "session-" + strconv.Itoa(i/8)
	case Working:
		w.Body = c.Text(10 + c.Intn(70))
	}
	w.Tags = c.Tags()
	return p, w
}

// populate writes records 0..n-1 through the store's one write path,
// validation and secret scan included, in a few big transactions: Put
// commits each record on its own, which at 100,000 records costs minutes.
func populate(ctx context.Context, s *Store, c *corpus.Corpus, n int) error {
	const batch = 10_000
	for start := 0; start < n; start += batch {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				p, w := benchWrite(c, i)
				if err := validate(&w); err != nil {
					return fmt.Errorf("record %d: %w", i, err)
				}
				if _, _, err := s.put(ctx, tx, p, w, ""); err != nil {
					return fmt.Errorf("record %d: %w", i, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// benchDB returns the path of the cached database of n records, building it
// on first use.
func benchDB(b *testing.B, n int) string {
	b.Helper()
	benchCache.Lock()
	defer benchCache.Unlock()
	if p, ok := benchCache.paths[n]; ok {
		return p
	}
	if benchCache.dir == "" {
		dir, err := os.MkdirTemp("", "memory-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchCache.dir = dir
	}
	path := filepath.Join(benchCache.dir, strconv.Itoa(n), "memory.db")
	start := time.Now()
	s, err := openTarget(context.Background(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := populate(context.Background(), s, corpus.New(benchSeed), n); err != nil {
		s.Close()
		b.Fatal(err)
	}
	// Closing checkpoints the WAL into the file, so a copy of the file
	// alone is the whole database.
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("built a database of %d records in %v", n, time.Since(start).Round(time.Millisecond))
	benchCache.paths[n] = path
	return path
}

// openBench opens the cached database of n records for reading.
func openBench(b *testing.B, n int) *Store {
	b.Helper()
	s, err := openTarget(context.Background(), benchDB(b, n), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// openBenchCopy opens a private copy of the database of n records, for
// benchmarks that write.
func openBenchCopy(b *testing.B, n int) *Store {
	b.Helper()
	src := benchDB(b, n)
	dst := filepath.Join(b.TempDir(), "memory.db")
	for _, suffix := range []string{"", "-wal"} {
		if err := copyFile(src+suffix, dst+suffix); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
	}
	s, err := openTarget(context.Background(), dst, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// eachSize runs fn as a sub-benchmark n=<size> for every size; -short skips
// the largest.
func eachSize(b *testing.B, fn func(b *testing.B, n int)) {
	for _, n := range benchSizes {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			if testing.Short() && n > 10_000 {
				b.Skip("-short: skipping the largest size")
			}
			fn(b, n)
		})
	}
}

// measure times op(0..b.N-1) after two untimed calls, op(b.N) and
// op(b.N+1): the first loads what a first call loads (the database's pages,
// mostly), the second shows the warm speed. When b.N calls at that speed
// would take over half a minute, as with -benchtime 100x and a call slower
// than 300 ms, or the first call takes longer than that itself, it skips
// instead: such a run says nothing one call does not, and the log says how
// slow that was.
func measure(b *testing.B, op func(ctx context.Context, i int) error) {
	b.Helper()
	const limit = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	err := op(ctx, b.N)
	timedOut := ctx.Err() != nil
	cancel()
	if timedOut {
		b.Skipf("one call took over %v", limit)
	}
	if err != nil {
		b.Fatal(err)
	}
	ctx = context.Background()
	start := time.Now()
	if err := op(ctx, b.N+1); err != nil {
		b.Fatal(err)
	}
	if took := time.Since(start); took*time.Duration(b.N) > limit {
		b.Skipf("one call took %v; not running %d of them", took.Round(time.Millisecond), b.N)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := op(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
}

// picks is a random sequence of record numbers below n to cycle through.
func picks(n int) []int {
	r := rand.New(rand.NewSource(benchSeed))
	out := make([]int, 4096)
	for i := range out {
		out[i] = r.Intn(n)
	}
	return out
}

// BenchmarkPutNew writes a project fact under a new key: validation, the
// secret scan, the conflict check, the row and its full-text entry, one
// commit.
func BenchmarkPutNew(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBenchCopy(b, n)
		c := corpus.New(benchSeed + 1)
		ws := make([]Write, b.N+2)
		for i := range ws {
			_, w := benchWrite(c, n+i)
			w.Scope, w.Type, w.Key = scope.Project, Semantic, "fresh-"+strconv.Itoa(i)
			ws[i] = w
		}
		measure(b, func(ctx context.Context, i int) error {
			_, created, err := s.Put(ctx, benchProjects[0], ws[i])
			if err == nil && !created {
				err = fmt.Errorf("%s was not new", ws[i].Key)
			}
			return err
		})
	})
}

// BenchmarkPutExisting rewrites an existing record with a new body: the
// row is updated and its full-text entry replaced.
func BenchmarkPutExisting(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBenchCopy(b, n)
		c := corpus.New(benchSeed + 1)
		idx := picks(n)
		ps, ws := make([]Project, b.N+2), make([]Write, b.N+2)
		for i := range ws {
			ps[i], ws[i] = benchWrite(c, idx[i%len(idx)])
			ws[i].Body += " Revision " + strconv.Itoa(i) + "."
		}
		measure(b, func(ctx context.Context, i int) error {
			_, created, err := s.Put(ctx, ps[i], ws[i])
			if err == nil && created {
				err = fmt.Errorf("%s was new", ws[i].Key)
			}
			return err
		})
	})
}

// BenchmarkUpdate patches the body of a record found by key and type,
// resolved through the scope chain.
func BenchmarkUpdate(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBenchCopy(b, n)
		idx := picks(n)
		measure(b, func(ctx context.Context, i int) error {
			p, _, t, key := benchName(idx[i%len(idx)])
			body := "Patched body, revision " + strconv.Itoa(i) + ": run make test before a release."
			_, err := s.Update(ctx, p, Selector{Key: key, Type: t}, Patch{Body: &body})
			return err
		})
	})
}

// BenchmarkGet reads one record in full by key and type, resolved through
// the scope chain, and counts the use (a write).
func BenchmarkGet(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBenchCopy(b, n)
		idx := picks(n)
		measure(b, func(ctx context.Context, i int) error {
			p, _, t, key := benchName(idx[i%len(idx)])
			_, err := s.Get(ctx, p.ID, Selector{Key: key, Type: t})
			return err
		})
	})
}

// BenchmarkSearch ranks the records matching a natural-language question of
// four to six searchable words.
func BenchmarkSearch(b *testing.B) {
	benchSearch(b, "", 0)
}

// BenchmarkSearchProcedural is the same question limited to procedures,
// the rarest type, as a recall with a query asks it: a filter few matches
// pass.
func BenchmarkSearchProcedural(b *testing.B) {
	benchSearch(b, Procedural, 20)
}

func benchSearch(b *testing.B, t Type, limit int) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBench(b, n)
		c := corpus.New(benchSeed + 2)
		qs := make([]string, 64)
		for i := range qs {
			qs[i] = c.Query()
		}
		measure(b, func(ctx context.Context, i int) error {
			_, err := s.Search(ctx, benchProjects[0].ID, SearchOptions{Query: qs[i%len(qs)], Type: t, Limit: limit})
			return err
		})
	})
}

// BenchmarkList reads the first page of the effective records.
func BenchmarkList(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBench(b, n)
		measure(b, func(ctx context.Context, _ int) error {
			rs, _, err := s.List(ctx, benchProjects[0].ID, ListOptions{})
			if err == nil && len(rs) == 0 {
				err = fmt.Errorf("empty list")
			}
			return err
		})
	})
}

// BenchmarkEffective is the recall block's read: the head of the effective
// facts and procedures in weave order, 400 of each at most.
func BenchmarkEffective(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBench(b, n)
		types := []Type{Semantic, Procedural}
		measure(b, func(ctx context.Context, _ int) error {
			rs, err := s.Effective(ctx, benchProjects[0].ID, types, 400)
			if err == nil && len(rs) == 0 {
				err = fmt.Errorf("nothing effective")
			}
			return err
		})
	})
}

// BenchmarkCount counts the effective facts, as every recall does.
func BenchmarkCount(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBench(b, n)
		measure(b, func(ctx context.Context, _ int) error {
			_, err := s.Count(ctx, benchProjects[0].ID, Semantic)
			return err
		})
	})
}

// BenchmarkIndex reads the head of the memory index, as the server does
// after every write to keep the initialize instructions current.
func BenchmarkIndex(b *testing.B) {
	eachSize(b, func(b *testing.B, n int) {
		s := openBench(b, n)
		measure(b, func(ctx context.Context, _ int) error {
			rs, err := s.Index(ctx, benchProjects[0].ID, 120)
			if err == nil && len(rs) == 0 {
				err = fmt.Errorf("empty index")
			}
			return err
		})
	})
}
