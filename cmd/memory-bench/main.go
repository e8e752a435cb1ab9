// Command memory-bench measures the real memory-mcp server as an agent sees
// it: it launches the binary, speaks MCP to it over stdio with the go-sdk
// client, and times each call at the client. The database and workspace
// are fresh temporary ones, seeded with realistic records first.
//
// Usage:
//
//	go run ./cmd/memory-bench [-n 10000] [-files 1000] [-ops 500] [-seed 1] [-server PATH] [-run REGEXP]
//	go run ./cmd/memory-bench -compare [-n 1000] [-procs 8] [-peer 'node .../server-memory/dist/index.js' ...]
//	go run ./cmd/memory-bench -eval [-eval-sizes 5000,20000] [-eval-dir testdata/eval]
//	go run ./cmd/memory-bench -vectors 10000,100000 [-dims 768] [-ops 200]
//	go run ./cmd/memory-bench -backends sqlite,postgres -db postgres://USER@HOST:PORT/DB [-http 16]
//	memory-bench -serve-nothing
//
// It prints a markdown report: latency percentiles and throughput per
// operation, process start to initialize result, the server's peak RSS,
// the database size and the machine. With -compare it measures memory-mcp
// and peer servers side by side from empty stores (see compare.go); with
// -eval, search quality (see eval.go); with -vectors, semantic and hybrid
// search over that many embedded records (see vectors.go). With -backends
// it measures the server on each store in turn, SQLite and PostgreSQL, and
// sets them side by side (see backends.go). With -serve-nothing it is
// itself an MCP server on stdio whose tools do nothing: as a -peer, the
// floor of every figure (see nothing.go).
//
// It imports memory, mirror and scope to seed the database quickly, corpus
// for the text of the records and queries, the MCP SDK's client, and pgx to
// make and drop the database of a PostgreSQL run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory-bench:", err)
		os.Exit(1)
	}
}

// config is what the flags decide.
type config struct {
	n, files, ops, starts int
	seed                  int64
	server                string
	budget, timeout       time.Duration
	keep                  bool
	httpClients           int            // measure a team server with this many clients instead
	sync                  bool           // measure team sync instead
	syncTenants, syncEach int            // with sync, tenants and records each for the server's memory
	only                  *regexp.Regexp // operations to measure; nil for all

	nothing   bool     // serve the do-nothing MCP server on stdio instead
	compare   bool     // measure side by side with the peers instead
	peers     peerList // peer server commands for -compare
	procs     int      // concurrent server processes for -compare
	perProc   int      // records each of them writes
	writeType string   // the type memory-mcp's records are written as

	eval      bool   // measure search quality instead of speed
	evalDir   string // the labelled sets
	evalSizes []int  // corpus sizes of the known-item evaluation
	// evalStoreOnly searches for the known items through the store alone,
	// not the server as well.
	evalStoreOnly bool

	vectors []int // measure vector search at these record counts instead
	dims    int   // the vectors' length

	backends []string // the stores measured, in order: sqlite, postgres
	dbURL    string   // the PostgreSQL server the postgres backend makes its database on
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("memory-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.n, "n", 10000, "records in the database")
	fs.IntVar(&c.files, "files", 1000, "how many of them are project facts mirrored to markdown files")
	fs.IntVar(&c.ops, "ops", 500, "calls measured per operation")
	fs.IntVar(&c.starts, "starts", 30, "server processes started to time start-up")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the generated records and queries")
	fs.StringVar(&c.server, "server", "", "memory-mcp binary (default: memory-mcp next to this command, else built with go build)")
	fs.DurationVar(&c.budget, "budget", 20*time.Second, "stop measuring an operation after this long")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up on an operation when one call takes longer")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary database and workspace, and print where they are")
	fs.IntVar(&c.httpClients, "http", 0, "instead, measure requests/s and latency of the server over HTTP with this many concurrent clients")
	fs.BoolVar(&c.sync, "sync", false, "instead, measure team sync: -n changes pushed by one machine and pulled by a new one, and the team server's memory with -sync-tenants of -sync-records each")
	fs.IntVar(&c.syncTenants, "sync-tenants", 100, "with -sync, tenants stored on the team server")
	fs.IntVar(&c.syncEach, "sync-records", 1000, "with -sync, records of each tenant")
	fs.BoolVar(&c.nothing, "serve-nothing", false, "instead, serve on stdin and stdout an MCP server made with the same SDK whose tools do nothing: as a -peer of -compare, the floor of every figure")
	fs.BoolVar(&c.compare, "compare", false, "instead, measure initialize on a fresh store, write, search and read p50/p99, peak RSS and concurrent writers, for memory-mcp and each -peer, from empty stores")
	fs.Var(&c.peers, "peer", "with -compare, a peer MCP server's command line to measure the same way (repeatable), e.g. 'node .../server-memory/dist/index.js'")
	fs.IntVar(&c.procs, "procs", 8, "with -compare, server processes writing to one store at once (0: skip)")
	fs.IntVar(&c.perProc, "per-proc", 250, "with -compare, records each of the -procs processes writes")
	fs.StringVar(&c.writeType, "write-type", "semantic", "with -compare, the type memory-mcp stores records as: semantic (a project fact, mirrored to a markdown file), procedural, episodic or working (no file)")
	only := fs.String("run", "", "measure only the operations whose name matches this regular expression")
	fs.BoolVar(&c.eval, "eval", false, "measure search quality (recall@5, MRR) on the labelled sets and on known items, not speed")
	fs.StringVar(&c.evalDir, "eval-dir", filepath.Join("testdata", "eval"), "directory of the labelled sets for -eval")
	fs.BoolVar(&c.evalStoreOnly, "eval-store-only", false, "with -eval, search for the known items through the store alone, not also through the server over stdio")
	sizes := fs.String("eval-sizes", "5000,20000", "record counts of the known-item evaluation, comma-separated")
	vectors := fs.String("vectors", "", "instead, measure semantic and hybrid search over this many embedded records, comma-separated (like 10000,100000)")
	fs.IntVar(&c.dims, "dims", 768, "dimensions of the vectors for -vectors")
	backends := fs.String("backends", "sqlite", "the stores to measure the server on, comma-separated: sqlite, postgres (needs -db); with several, a table sets them side by side")
	fs.StringVar(&c.dbURL, "db", "", "for -backends postgres, a PostgreSQL server's URL (postgres://USER@HOST:PORT/DB) whose role may create databases: the run makes a database of its own there and drops it after")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.backends, err = parseBackends(*backends, c.dbURL); err != nil {
		return c, err
	}
	if *vectors != "" {
		for _, f := range strings.Split(*vectors, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return c, fmt.Errorf("-vectors: %q is not a record count", f)
			}
			c.vectors = append(c.vectors, n)
		}
		if c.dims < 1 {
			return c, fmt.Errorf("-dims: want a positive number")
		}
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-eval-sizes: %q is not a record count", f)
		}
		c.evalSizes = append(c.evalSizes, n)
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return c, fmt.Errorf("-run: %w", err)
		}
		c.only = re
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.n < 1 || c.files < 0 || c.files > c.n:
		return c, fmt.Errorf("want -n >= 1 and 0 <= -files <= -n")
	case c.ops < 1 || c.starts < 1:
		return c, fmt.Errorf("want -ops >= 1 and -starts >= 1")
	case c.procs < 0 || c.perProc < 1:
		return c, fmt.Errorf("want -procs >= 0 and -per-proc >= 1")
	case len(c.peers) > 0 && !c.compare:
		return c, fmt.Errorf("-peer needs -compare")
	case (c.compare || c.eval || len(c.vectors) > 0) && !slices.Equal(c.backends, []string{"sqlite"}):
		return c, fmt.Errorf("-backends goes with the stdio and -http measurements, not -compare, -eval or -vectors")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.nothing {
		return serveNothing(ctx, os.Stdin, stdout)
	}
	if cfg.eval {
		return runEval(ctx, cfg, stdout, stderr)
	}
	if len(cfg.vectors) > 0 {
		return runVectors(ctx, cfg, stdout, stderr)
	}
	tmp, err := os.MkdirTemp("", "memory-bench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		fmt.Fprintln(stderr, "memory-bench: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	bin, err := findServer(ctx, cfg.server, tmp, stderr)
	if err != nil {
		return err
	}
	if cfg.compare {
		return runCompare(ctx, cfg, bin, tmp, stdout, stderr)
	}
	var reps []*report
	for _, name := range cfg.backends {
		b, done, err := openBackend(ctx, cfg, name, stderr)
		if err != nil {
			return err
		}
		dir := filepath.Join(tmp, name)
		if cfg.sync {
			r, err := runSync(ctx, cfg, b, bin, dir, stderr)
			done()
			if err != nil {
				return fmt.Errorf("%s: %w", b.title(), err)
			}
			r.write(stdout)
			continue
		}
		if cfg.httpClients > 0 {
			err = runHTTP(ctx, cfg, b, bin, dir, stdout, stderr)
			done()
			if err != nil {
				return err
			}
			continue
		}
		rep, err := runStdio(ctx, cfg, b, bin, dir, stderr)
		done()
		if err != nil {
			return fmt.Errorf("%s: %w", b.title(), err)
		}
		if err := rep.write(stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		reps = append(reps, rep)
	}
	if len(reps) > 1 {
		return writeSideBySide(stdout, reps)
	}
	return nil
}

// runStdio seeds the store of b and measures the server over stdio on it.
func runStdio(ctx context.Context, cfg config, b backend, bin, tmp string, stderr io.Writer) (*report, error) {
	home := filepath.Join(tmp, "home")
	dbPath := filepath.Join(home, ".prometheus", "memory.db")
	if err := os.MkdirAll(filepath.Join(tmp, "workspace"), 0o755); err != nil {
		return nil, err
	}
	// The server resolves the root the same way, so both see one project.
	root, err := scope.Root(filepath.Join(tmp, "workspace"), "")
	if err != nil {
		return nil, err
	}
	env := []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		b.env(dbPath), "PROMETHEUS_WORKSPACE_ROOT=" + root,
	}
	// The Go runtime's settings and the server's CPU profile pass
	// through, to see where a call's time goes.
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS", "MEMORY_MCP_CPUPROFILE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}

	c := newRecords(cfg.seed, cfg.files)
	seeded, err := seed(ctx, b.target(dbPath), root, c, cfg.n, stderr)
	if err != nil {
		return nil, err
	}
	// Files written within the mirror's racy window are re-read by every
	// sync until it passes; files in a real checkout are older than that.
	time.Sleep(2500 * time.Millisecond)

	rep := report{cfg: cfg, backend: b, server: bin, seeded: seeded, machine: describeMachine()}
	srv, first, err := launch(ctx, bin, env, root)
	if err != nil {
		return nil, err
	}
	defer func() {
		if srv != nil {
			srv.close()
		}
	}()
	rep.firstStart = first
	lim := limits{count: cfg.ops, warm: 3, budget: cfg.budget, timeout: cfg.timeout}
	for _, o := range ops(c, cfg) {
		if !cfg.selected(o.name) {
			continue
		}
		fmt.Fprintf(stderr, "memory-bench: measuring %s\n", o.name)
		smp, err := measure(ctx, srv, o, lim)
		if err != nil {
			return nil, err
		}
		rep.samples = append(rep.samples, smp)
		if o.settle {
			time.Sleep(2500 * time.Millisecond)
		}
	}

	// Start-up last, while the first server still runs: it has saved the
	// initialize instructions by now, as a long-running server would have.
	if starts := (sample{name: "start → initialize result"}); cfg.selected(starts.name) {
		fmt.Fprintf(stderr, "memory-bench: starting %d servers\n", cfg.starts)
		begin := time.Now()
		for range cfg.starts {
			s, took, err := launch(ctx, bin, env, root)
			if err != nil {
				return nil, err
			}
			starts.durs = append(starts.durs, took)
			if err := s.close(); err != nil {
				return nil, fmt.Errorf("stop server: %w%s", err, s.stderr.suffix())
			}
		}
		starts.wall = time.Since(begin)
		rep.samples = append([]sample{starts}, rep.samples...)
	}

	if m, err := srv.memory(); err != nil {
		rep.rssNote = err.Error()
	} else {
		rep.peakRSS, rep.rss, rep.rssSplit = m.peak, m.now, m.split()
	}
	if b.name == "postgres" {
		rep.dbSize = pgSize(ctx, b.url)
	} else {
		rep.dbSize, rep.walSize = fileSize(dbPath), fileSize(dbPath+"-wal")
	}
	err = srv.close()
	log := srv.stderr.suffix()
	srv = nil
	if err != nil {
		return nil, fmt.Errorf("stop server: %w%s", err, log)
	}
	return &rep, nil
}

// selected reports whether the operation called name is to be measured.
func (c config) selected(name string) bool { return c.only == nil || c.only.MatchString(name) }

// ops are the measured calls, in order. Writes use new keys; reads and
// updates pick seeded records this project sees.
func ops(c *records, cfg config) []op {
	r := rand.New(rand.NewSource(cfg.seed + 7))
	var visible []int
	for i := range cfg.n {
		if other, _, _, _ := c.name(i); !other {
			visible = append(visible, i)
		}
	}
	pick := func() (string, memory.Type) {
		_, _, t, key := c.name(visible[r.Intn(len(visible))])
		return key, t
	}
	return []op{
		{name: "memory_write (working/episodic, no file)", tool: "memory_write", args: func(i int) map[string]any {
			t := []memory.Type{memory.Working, memory.Episodic}[i%2]
			return map[string]any{"type": t, "key": fmt.Sprintf("bench-note-%d", i), "body": c.body(t),
				"description": c.Description(), "tags": c.Tags(), "session_id": "bench-session"}
		}},
		{name: "memory_write (semantic, writes a file)", tool: "memory_write", settle: true, args: func(i int) map[string]any {
			return map[string]any{"type": memory.Semantic, "key": fmt.Sprintf("bench-fact-%d", i), "body": c.body(memory.Semantic),
				"description": c.Description(), "tags": c.Tags(), "confidence": 0.7}
		}},
		{name: "memory_update (body)", tool: "memory_update", settle: true, args: func(i int) map[string]any {
			key, t := pick()
			return map[string]any{"key": key, "type": t, "body": c.body(t)}
		}},
		{name: "memory_read (key)", tool: "memory_read", args: func(i int) map[string]any {
			key, t := pick()
			return map[string]any{"key": key, "type": t}
		}},
		{name: "memory_read (woven recall)", tool: "memory_read", args: func(i int) map[string]any {
			return map[string]any{}
		}},
		{name: "memory_read (woven recall, query)", tool: "memory_read", args: func(i int) map[string]any {
			return map[string]any{"query": c.Query()}
		}},
		{name: "memory_search", tool: "memory_search", args: func(i int) map[string]any {
			return map[string]any{"query": c.Query()}
		}},
		{name: "memory_list (first page)", tool: "memory_list", args: func(i int) map[string]any {
			return map[string]any{}
		}},
	}
}

// findServer returns the memory-mcp binary to measure: -server, else one
// beside this command, else a fresh build of this module's.
func findServer(ctx context.Context, flagPath, tmp string, stderr io.Writer) (string, error) {
	name := "memory-mcp"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if flagPath != "" {
		p, err := filepath.Abs(flagPath)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("-server: %w", err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	out := filepath.Join(tmp, "bin", name)
	fmt.Fprintln(stderr, "memory-bench: building memory-mcp")
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "prom.codes/memory-mcp/cmd/memory-mcp")
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build memory-mcp (run from inside the module, or pass -server): %w", err)
	}
	return out, nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
