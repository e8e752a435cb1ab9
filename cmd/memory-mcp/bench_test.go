package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	st, err := memory.Open(ctx, f.db, nil)
	if err != nil {
		b.Fatal(err)
	}
	md, err := mirror.Open(root)
	if err != nil {
		b.Fatal(err)
	}
	this := memory.Project{ID: scope.IdentityOf(root), Mirror: md}
	other := memory.Project{ID: scope.IdentityOf(filepath.Join(dir, "other-workspace"))}
	c := newBenchCorpus(1)
	for i := range n {
		isOther, w := c.write(i, files)
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
		f.queries = append(f.queries, c.query())
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
				cmd := exec.Command(binary)
				cmd.Env, cmd.Dir = e.vars(), e.root
				var stderr strings.Builder
				cmd.Stderr = &stderr
				client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
				cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
				if err != nil {
					b.Fatalf("connect: %v\n%s", err, stderr.String())
				}
				return cs, &stderr
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
// 1,000 of them project facts in markdown files.
const (
	benchN     = 10_000
	benchFiles = 1_000
)

// BenchmarkRecall weaves the recall block, no query, through the app: the
// effective facts and procedures, the counts, the weave and the use counts.
func BenchmarkRecall(b *testing.B) {
	b.Run("n="+strconv.Itoa(benchN), func(b *testing.B) {
		a := fixture(b, benchN, benchFiles).app(b)
		benchMeasure(b, func(ctx context.Context) error {
			blk, err := a.recall(ctx, "", nil, 0)
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
			_, err := a.recall(ctx, f.queries[i%len(f.queries)], nil, 0)
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
			rep, err := a.sync(ctx)
			if err != nil {
				return err
			}
			if len(rep.Imported)+len(rep.Deleted)+len(rep.Problems) > 0 {
				return fmt.Errorf("sync changed something: %+v", rep)
			}
			_, err = a.recall(ctx, "", nil, 0)
			return err
		})
	})
}

// benchCorpus makes records of realistic text, the model of
// memory/bench_test.go and cmd/memory-bench: every word drawn by Zipf's law
// from a vocabulary of a few thousand, stop-words at its head.
type benchCorpus struct {
	seed  int64
	r     *rand.Rand
	zipf  *rand.Zipf
	vocab []string
	stops int
}

func newBenchCorpus(seed int64) *benchCorpus {
	const size = 4500
	r := rand.New(rand.NewSource(seed))
	c := &benchCorpus{seed: seed, r: r, zipf: rand.NewZipf(r, 1.07, 2, size-1)}
	seen := map[string]bool{}
	add := func(w string) {
		if !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	for _, w := range strings.Fields("the of and to a in is it that for on with as be this by are or not from at we if when then can should will you") {
		add(w)
	}
	c.stops = len(c.vocab)
	for _, w := range strings.Fields(`test tests build deploy release database migration schema service server client api
		config flag env variable secret token auth login user session cache queue worker job cron retry timeout error
		log metric trace alert docker image container kubernetes cluster terraform module package dependency version
		branch commit merge review pull request ci pipeline lint format race fuzz benchmark integration unit fixture
		mock golden snapshot coverage flaky slow fast go python typescript sql sqlite postgres redis kafka grpc http
		json yaml markdown file directory path root workspace project repo script make command shell agent prompt
		model context memory index search query rank score field column table row key value type handler middleware
		router endpoint request response status header body payload frontend backend component page layout style
		date time zone clock timestamp duration deadline cancel signal shutdown restart install upgrade rollback
		backup restore replica storage disk cpu latency throughput load limit quota budget cost customer tenant
		account team owner policy rule convention guide doc readme changelog issue bug fix feature refactor rename`) {
		add(w)
	}
	onsets := strings.Fields("b c d f g h k l m n p r s t v w z br cr dr fl gr pl pr sk sl sp st tr ch sh th")
	vowels := strings.Fields("a e i o u ai ea ee io oa ou")
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "x", "m", "nd", "st"}
	for len(c.vocab) < size {
		var b strings.Builder
		for range 2 + r.Intn(2) {
			b.WriteString(onsets[r.Intn(len(onsets))] + vowels[r.Intn(len(vowels))])
		}
		add(b.String() + codas[r.Intn(len(codas))])
	}
	return c
}

func (c *benchCorpus) text(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = c.vocab[c.zipf.Uint64()]
		if i%9 == 8 || i == n-1 {
			words[i] += "."
		}
	}
	return strings.Join(words, " ")
}

// write is record i: the first files are project facts, the rest project
// episodes and notes, machine-wide facts and procedures, and another
// workspace's records, as in cmd/memory-bench.
func (c *benchCorpus) write(i, files int) (other bool, w memory.Write) {
	h := uint64(i)*0x9e3779b97f4a7c15 ^ uint64(c.seed)
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	w = memory.Write{
		Scope: scope.Project, Type: memory.Semantic,
		Key:         c.vocab[c.stops+int((h>>8)%1000)] + "-" + strconv.Itoa(i),
		Description: c.text(5 + c.r.Intn(8)),
	}
	switch u := h % 100; {
	case i < files:
	case u < 30:
		w.Type, w.SessionID = memory.Episodic, "session-"+strconv.Itoa(i/8)
	case u < 55:
		w.Type = memory.Working
	case u < 65:
		w.Scope = scope.System
	case u < 70:
		w.Scope, w.Type = scope.System, memory.Procedural
	case u < 75:
		w.Scope = scope.Workspace
	default:
		other, w.Type = true, []memory.Type{memory.Semantic, memory.Procedural, memory.Episodic, memory.Working}[(h>>16)%4]
	}
	switch w.Type {
	case memory.Semantic:
		w.Body = c.text(15 + c.r.Intn(45))
		conf := 0.3 + float64(c.r.Intn(66))/100
		w.Confidence = &conf
	case memory.Procedural:
		for step, steps := 1, 3+c.r.Intn(8); step <= steps; step++ {
			w.Body += strconv.Itoa(step) + ". " + c.text(5+c.r.Intn(8)) + "\n"
		}
	case memory.Episodic:
		w.Body = c.text(60 + c.r.Intn(190))
	default:
		w.Body = c.text(10 + c.r.Intn(70))
	}
	return other, w
}

// query is a task in 4 to 6 searchable words, as frequent as in the text.
func (c *benchCorpus) query() string {
	words := []string{"how", "do", "we"}
	for k := 4 + c.r.Intn(3); k > 0; {
		if i := int(c.zipf.Uint64()); i >= c.stops {
			words = append(words, c.vocab[i])
			k--
		}
	}
	return strings.Join(words, " ")
}
