package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

// These benchmarks measure the server above the store: start-up of the real
// binary to the initialize result, and the woven recall at 10,000 records of
// which 1,000 are mirrored to markdown. The markdown sync itself, unchanged
// and changed, is measured in mirror/bench_test.go; the store's hot paths
// in memory/bench_test.go; every tool over stdio by cmd/memory-bench.

// benchFixture is a workspace with n records in its database, the first
// files of them project facts with their markdown files. It is built once
// per test binary, under the directory TestMain removes, and copied by the
// benchmarks that use it: the database, that is, since recall writes use
// counts; the workspace root, and so the project identity, stays put.
type benchFixture struct {
	root    string
	db      string
	ready   time.Time // when the files have left the mirror's racy window
	queries []string
}

var benchFixtures = struct {
	sync.Mutex
	m map[string]*benchFixture
}{m: map[string]*benchFixture{}}

// fixture returns the fixture of n records and files files, building it on
// first use through memory.Store.Put and the mirror, as the server writes.
func fixture(b *testing.B, n, files int) *benchFixture {
	b.Helper()
	name := fmt.Sprintf("n%d-files%d", n, files)
	benchFixtures.Lock()
	defer benchFixtures.Unlock()
	if f, ok := benchFixtures.m[name]; ok {
		return f
	}
	dir := filepath.Join(filepath.Dir(binary), "bench", name)
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		b.Fatal(err)
	}
	root, err := scope.Root(filepath.Join(dir, "workspace"), "")
	if err != nil {
		b.Fatal(err)
	}
	f := &benchFixture{root: root, db: filepath.Join(dir, "memory.db")}
	start := time.Now()
	ctx := context.Background()
	st, err := openStore(ctx, f.db, nil)
	if err != nil {
		b.Fatal(err)
	}
	md, err := mirror.Open(root)
	if err != nil {
		b.Fatal(err)
	}
	this := memory.Project{ID: scope.IdentityOf(root), Mirror: md}
	other := memory.Project{ID: scope.IdentityOf(filepath.Join(dir, "other-workspace"))}
	c := corpus.New(benchSeed)
	for i := range n {
		isOther, w := benchRecord(c, i, files)
		p := this
		if isOther {
			p = other
		}
		if _, _, err := st.Put(ctx, p, w); err != nil {
			b.Fatalf("record %d: %v", i, err)
		}
	}
	md.Close()
	// Closing checkpoints the WAL, so the file alone is the database.
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	for range 64 {
		f.queries = append(f.queries, c.Query())
	}
	f.ready = time.Now().Add(2500 * time.Millisecond)
	b.Logf("built %d records, %d markdown files in %v", n, files, time.Since(start).Round(time.Millisecond))
	benchFixtures.m[name] = f
	return f
}

// copyDB copies the fixture's database into a fresh directory and returns
// the copy's path, once the fixture's files are old enough that a sync
// trusts their size and modification time, as it would in a real checkout.
func (f *benchFixture) copyDB(b *testing.B) string {
	b.Helper()
	time.Sleep(time.Until(f.ready))
	dst := filepath.Join(b.TempDir(), "memory.db")
	in, err := os.Open(f.db)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return dst
}

// app opens an app on a copy of the fixture, as the server would.
func (f *benchFixture) app(b *testing.B) *app {
	b.Helper()
	vars := map[string]string{"PROMETHEUS_MEMORY_DB_PATH": f.copyDB(b), "PROMETHEUS_WORKSPACE_ROOT": f.root}
	cfg, err := loadConfig(func(k string) string { return vars[k] })
	if err != nil {
		b.Fatal(err)
	}
	a, err := openApp(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return a
}

// benchMeasure times b.N calls of op after two untimed ones: the first
// loads what a first call loads (the tokenizer, the database's pages), the
// second shows the warm speed. When b.N calls at that speed would take over
// half a minute, as with -benchtime 100x and a call slower than 300 ms, or
// the first call takes longer than that itself, it skips instead: such a
// run says nothing one call does not, and the log says how slow that was.
func benchMeasure(b *testing.B, op func(ctx context.Context) error) {
	b.Helper()
	const limit = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	err := op(ctx)
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
	if err := op(ctx); err != nil {
		b.Fatal(err)
	}
	if took := time.Since(start); took*time.Duration(b.N) > limit {
		b.Skipf("one call took %v; not running %d of them", took.Round(time.Millisecond), b.N)
	}
	b.ResetTimer()
	for range b.N {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartup times the real binary from process start to the
// initialize result, as an agent launching it sees it; stopping it is not
// timed. n=0 is an empty database, n=10000 the recall fixture's.
func BenchmarkStartup(b *testing.B) {
	for _, n := range []int{0, 10_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			e := env{home: b.TempDir()}
			if n == 0 {
				e.root = b.TempDir()
				e.db = filepath.Join(e.home, ".prometheus", "memory.db")
			} else {
				f := fixture(b, n, 1000)
				e.root, e.db = f.root, f.copyDB(b)
			}
			start := func() (*mcp.ClientSession, *strings.Builder) {
				cs, _, stderr := startBinary(b, binary, e)
				return cs, stderr
			}
			stop := func(cs *mcp.ClientSession, stderr *strings.Builder) {
				if err := cs.Close(); err != nil {
					b.Fatalf("stop: %v\n%s", err, stderr.String())
				}
			}
			// The first start creates the database and a later one finds
			// the instructions saved; time the steady state.
			cs, stderr := start()
			time.Sleep(1500 * time.Millisecond)
			stop(cs, stderr)
			b.ResetTimer()
			for range b.N {
				cs, stderr := start()
				b.StopTimer()
				stop(cs, stderr)
				b.StartTimer()
			}
		})
	}
}

// benchN and benchFiles are the size of the recall fixture: 10,000 records,
// 1,000 of them project facts in markdown files. benchSeed fixes their
// names, text and queries; it is cmd/memory-bench's default -seed, so both
// seed the same records.
const (
	benchN     = 10_000
	benchFiles = 1_000
	benchSeed  = 1
)

// BenchmarkRecall weaves the recall block, no query, through the app: the
// effective facts and procedures, the counts, the weave and the use counts.
func BenchmarkRecall(b *testing.B) {
	b.Run("n="+strconv.Itoa(benchN), func(b *testing.B) {
		a := fixture(b, benchN, benchFiles).app(b)
		benchMeasure(b, func(ctx context.Context) error {
			blk, err := a.Recall(ctx, "", nil, 0)
			if err == nil && len(blk.Included) == 0 {
				err = fmt.Errorf("empty recall block")
			}
			return err
		})
	})
}

// BenchmarkRecallQuery weaves the recall block for a task described in 4
// to 6 searchable words: the same as BenchmarkRecall plus a search per type.
func BenchmarkRecallQuery(b *testing.B) {
	b.Run("n="+strconv.Itoa(benchN), func(b *testing.B) {
		f := fixture(b, benchN, benchFiles)
		a := f.app(b)
		i := 0
		benchMeasure(b, func(ctx context.Context) error {
			i++
			_, err := a.Recall(ctx, f.queries[i%len(f.queries)], nil, 0)
			return err
		})
	})
}

// BenchmarkReadWoven is memory_read without a key below the protocol: the
// markdown sync that precedes every read (nothing changed on disk), then
// the recall.
func BenchmarkReadWoven(b *testing.B) {
	b.Run("n="+strconv.Itoa(benchN), func(b *testing.B) {
		a := fixture(b, benchN, benchFiles).app(b)
		benchMeasure(b, func(ctx context.Context) error {
			rep, err := a.Sync(ctx)
			if err != nil {
				return err
			}
			if len(rep.Imported)+len(rep.Deleted)+len(rep.Problems) > 0 {
				return fmt.Errorf("sync changed something: %+v", rep)
			}
			_, err = a.Recall(ctx, "", nil, 0)
			return err
		})
	})
}

// benchRecord is record i of the fixture, as cmd/memory-bench seeds it
// (see its records type): the first files are project facts, the rest
// project episodes and notes, machine-wide facts and procedures, and
// another workspace's records, their text from c.
func benchRecord(c *corpus.Corpus, i, files int) (other bool, w memory.Write) {
	h := corpus.Mix(benchSeed, i)
	w = memory.Write{
		Scope: scope.Project, Type: memory.Semantic,
		Key: corpus.TermAt((h>>16)%1000) + "-" + corpus.TermAt(h>>32) + "-" + strconv.Itoa(i),
	}
	switch u := h % 100; {
	case i < files:
	case u < 30:
		w.Type = memory.Episodic
	case u < 55:
		w.Type = memory.Working
	case u < 65:
		w.Scope = scope.System
	case u < 70:
		w.Scope, w.Type = scope.System, memory.Procedural
	case u < 75:
		w.Scope = scope.Workspace
	default:
		other, w.Type = true, []memory.Type{memory.Semantic, memory.Procedural, memory.Episodic, memory.Working}[(h>>8)%4]
	}
	w.Description = c.Description()
	switch w.Type {
	case memory.Semantic:
		w.Body = c.Text(15 + c.Intn(45))
	case memory.Procedural:
		w.Body = c.Steps(30 + c.Intn(90))
	case memory.Episodic:
		w.Body = c.Text(60 + c.Intn(190))
	default:
		w.Body = c.Text(10 + c.Intn(70))
	}
	w.Tags = c.Tags()
	switch w.Type {
	case memory.Semantic:
		conf := 0.3 + float64(c.Intn(66))/100
		w.Confidence = &conf
	case memory.Episodic:
		w.SessionID = "session-" + strconv.Itoa(i/8)
	}
	return other, w
}
