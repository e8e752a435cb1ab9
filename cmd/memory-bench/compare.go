package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-bench/corpus"
	"prom.codes/memory-mcp/scope"
)

// Side by side: -compare measures memory-mcp and every -peer server the
// same way, through the same client, in one run. Every server starts from
// an empty store, so the n records are written through MCP by everyone
// (which is also what the write figure times); then come searches, reads
// by key, the peak RSS, and the concurrent writers.

// flavour is which set of tools a server speaks; the benchmark maps its
// operations onto each.
type flavour int

const (
	ours   flavour = iota // memory_write, memory_search, memory_read
	graph                 // @modelcontextprotocol/server-memory: create_entities, search_nodes, open_nodes
	devkit                // @ai-devkit/memory: memory_storeKnowledge, memory_searchKnowledge
)

// target is one server to measure.
type target struct {
	name string
	argv []string
	// ours is memory-mcp; its environment is the one it documents.
	ours bool
}

// peerList is the repeatable -peer flag: one command line per peer.
type peerList []string

func (p *peerList) String() string     { return strings.Join(*p, "; ") }
func (p *peerList) Set(v string) error { *p = append(*p, v); return nil }

// figures are what one server gave.
type figures struct {
	name                    string
	initialize              []time.Duration
	writes, searches, reads []time.Duration
	writeErrs               int
	noRead                  string // why reads were not measured
	peakRSS                 int64
	rssSplit                string // at the end: anonymous and mapped from files
	rssNote                 string
	concurrent              concurrentResult
}

type concurrentResult struct {
	procs, records, errors int
	wall                   time.Duration
	firstErr               string
}

// store is a fresh, empty place for a server's data.
type store struct {
	dir, root string
	env       []string
}

func newStore(tmp string) (store, error) {
	dir, err := os.MkdirTemp(tmp, "store-")
	if err != nil {
		return store{}, err
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return store{}, err
	}
	root, err := scope.Root(ws, "")
	if err != nil {
		return store{}, err
	}
	home := filepath.Join(dir, "home")
	env := []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"PROMETHEUS_MEMORY_DB_PATH=" + filepath.Join(home, ".prometheus", "memory.db"),
		"PROMETHEUS_WORKSPACE_ROOT=" + root,
		"MEMORY_FILE_PATH=" + filepath.Join(dir, "memory.jsonl"),
	}
	// The Go runtime's and the C allocator's knobs pass through, to
	// measure their effect.
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return store{dir: dir, root: root, env: env}, nil
}

// start launches t on st and reports the time to the initialize result.
func (t target) start(ctx context.Context, st store) (*session, time.Duration, error) {
	cmd := exec.Command(t.argv[0], t.argv[1:]...)
	cmd.Env = st.env
	cmd.Dir = st.root
	s := &session{cmd: cmd, stderr: &tail{max: 64 << 10}}
	cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "memory-bench", Version: "1"}, nil)
	begin := time.Now()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	took := time.Since(begin)
	if err != nil {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		return nil, took, fmt.Errorf("start %s: %w%s", t.name, err, s.stderr.suffix())
	}
	s.cs = cs
	return s, took, nil
}

// detect tells which tools s speaks.
func detect(ctx context.Context, s *session) (flavour, error) {
	res, err := s.cs.ListTools(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("list tools: %w", err)
	}
	have := map[string]bool{}
	for _, t := range res.Tools {
		have[t.Name] = true
	}
	switch {
	case have["memory_write"] && have["memory_search"]:
		return ours, nil
	case have["create_entities"] && have["search_nodes"]:
		return graph, nil
	case have["memory_storeKnowledge"] && have["memory_searchKnowledge"]:
		return devkit, nil
	}
	return 0, fmt.Errorf("unknown tool set %v: no mapping of write and search onto it", slices.Sorted(func(yield func(string) bool) {
		for k := range have {
			if !yield(k) {
				return
			}
		}
	}))
}

// fact is one record as every server is asked to keep it.
type fact struct {
	key, description, body string
	tags                   []string
}

func makeFacts(seed int64, n int) []fact {
	c := corpus.New(seed)
	out := make([]fact, n)
	for i := range out {
		out[i] = fact{
			key:         fmt.Sprintf("%s-%s-%d", c.Term(), c.Term(), i),
			description: c.Description(),
			body:        c.Text(15 + c.Intn(45)),
			tags:        c.Tags(),
		}
	}
	return out
}

// writeCall maps storing f onto the tools of fl; memory-mcp stores it as
// a record of type typ.
func writeCall(fl flavour, f fact, typ string) (string, map[string]any) {
	switch fl {
	case graph:
		return "create_entities", map[string]any{"entities": []map[string]any{{"name": f.key, "entityType": "fact", "observations": []string{f.description, f.body}}}}
	case devkit:
		// Its title takes 10-100 characters and its content 50-5,000.
		title := clipTo(f.key+": "+f.description, 100)
		body := f.body
		for len(body) < 50 {
			body += " " + f.description
		}
		return "memory_storeKnowledge", map[string]any{"title": title, "content": body, "tags": f.tags[:min(len(f.tags), 10)], "scope": "project:bench"}
	}
	return "memory_write", map[string]any{"type": typ, "key": f.key, "description": f.description, "body": f.body, "tags": f.tags}
}

func searchCall(fl flavour, q string) (string, map[string]any) {
	switch fl {
	case graph:
		return "search_nodes", map[string]any{"query": q}
	case devkit:
		return "memory_searchKnowledge", map[string]any{"query": q, "limit": 10}
	}
	return "memory_search", map[string]any{"query": q}
}

// readCall maps reading one record by its name; false when the server has
// no such tool.
func readCall(fl flavour, key string) (string, map[string]any, bool) {
	switch fl {
	case graph:
		return "open_nodes", map[string]any{"names": []string{key}}, true
	case devkit:
		return "", nil, false
	}
	return "memory_read", map[string]any{"key": key}, true
}

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimSpace(s[:n])
}

// runCompare measures memory-mcp (bin) and each peer, and prints one table.
func runCompare(ctx context.Context, cfg config, bin, tmp string, stdout, stderr io.Writer) error {
	targets := []target{{name: "memory-mcp", argv: []string{bin}, ours: true}}
	for _, p := range cfg.peers {
		argv := strings.Fields(p)
		if len(argv) == 0 {
			return fmt.Errorf("-peer: empty command")
		}
		targets = append(targets, target{name: peerName(argv), argv: argv})
	}
	facts := makeFacts(cfg.seed, cfg.n)
	var all []figures
	for _, t := range targets {
		fmt.Fprintf(stderr, "memory-bench: measuring %s\n", t.name)
		f, err := measureTarget(ctx, cfg, t, facts, tmp, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		all = append(all, f)
	}
	return writeCompare(stdout, cfg, all)
}

// peerName is a short name for a peer command: its package or program.
func peerName(argv []string) string {
	for _, a := range argv[1:] {
		if strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-") == "serve-nothing" {
			return nothingName
		}
	}
	for i := len(argv) - 1; i >= 0; i-- {
		a := argv[i]
		if j := strings.Index(a, "@"); j >= 0 && !strings.HasPrefix(a, "-") {
			a = a[j:]
			if k := strings.Index(a, "/dist/"); k >= 0 {
				a = a[:k]
			}
			return a
		}
	}
	return filepath.Base(argv[len(argv)-1])
}

func measureTarget(ctx context.Context, cfg config, t target, facts []fact, tmp string, stderr io.Writer) (figures, error) {
	f := figures{name: t.name}
	// Initialize on a fresh store, each time a new one.
	for range cfg.starts {
		st, err := newStore(tmp)
		if err != nil {
			return f, err
		}
		s, took, err := t.start(ctx, st)
		if err != nil {
			return f, err
		}
		f.initialize = append(f.initialize, took)
		if err := s.close(); err != nil {
			return f, fmt.Errorf("stop: %w%s", err, s.stderr.suffix())
		}
	}

	st, err := newStore(tmp)
	if err != nil {
		return f, err
	}
	s, _, err := t.start(ctx, st)
	if err != nil {
		return f, err
	}
	defer s.close()
	fl, err := detect(ctx, s)
	if err != nil {
		return f, err
	}
	timed := func(tool string, args map[string]any) (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		begin := time.Now()
		err := s.call(cctx, tool, args)
		return time.Since(begin), err
	}
	fmt.Fprintf(stderr, "memory-bench: %s: writing %d records\n", t.name, len(facts))
	for _, fc := range facts {
		tool, args := writeCall(fl, fc, cfg.writeType)
		d, err := timed(tool, args)
		if err != nil {
			f.writeErrs++
			if f.writeErrs > len(facts)/10 {
				return f, fmt.Errorf("write: %w%s", err, s.stderr.suffix())
			}
			continue
		}
		f.writes = append(f.writes, d)
	}
	// Files just written would be re-read within the mirror's racy window;
	// a real checkout's are older.
	if t.ours {
		time.Sleep(2500 * time.Millisecond)
	}
	c := corpus.New(cfg.seed + 11)
	r := rand.New(rand.NewSource(cfg.seed + 13))
	fmt.Fprintf(stderr, "memory-bench: %s: %d searches\n", t.name, cfg.ops)
	for i := range cfg.ops + 3 {
		tool, args := searchCall(fl, c.Query())
		d, err := timed(tool, args)
		if err != nil {
			return f, fmt.Errorf("search: %w%s", err, s.stderr.suffix())
		}
		if i >= 3 {
			f.searches = append(f.searches, d)
		}
	}
	if _, _, ok := readCall(fl, ""); !ok {
		f.noRead = "no tool reads one record by name"
	} else {
		fmt.Fprintf(stderr, "memory-bench: %s: %d reads\n", t.name, cfg.ops)
		for i := range cfg.ops + 3 {
			tool, args, _ := readCall(fl, facts[r.Intn(len(facts))].key)
			d, err := timed(tool, args)
			if err != nil {
				return f, fmt.Errorf("read: %w%s", err, s.stderr.suffix())
			}
			if i >= 3 {
				f.reads = append(f.reads, d)
			}
		}
	}
	if m, err := s.memory(); err != nil {
		f.rssNote = err.Error()
	} else {
		f.peakRSS, f.rssSplit = m.peak, m.split()
	}
	if err := s.close(); err != nil {
		return f, fmt.Errorf("stop: %w%s", err, s.stderr.suffix())
	}

	if cfg.procs > 0 {
		fmt.Fprintf(stderr, "memory-bench: %s: %d processes writing at once\n", t.name, cfg.procs)
		if f.concurrent, err = concurrentWrites(ctx, cfg, t, fl, tmp); err != nil {
			return f, err
		}
	}
	return f, nil
}

// concurrentWrites starts cfg.procs servers on one fresh store, each with
// its own client, lets each write cfg.perProc new records as fast as it is
// answered, all at once, and counts the records acknowledged per second of
// wall time from the first call to the last answer. Start-up is not timed.
func concurrentWrites(ctx context.Context, cfg config, t target, fl flavour, tmp string) (concurrentResult, error) {
	res := concurrentResult{procs: cfg.procs}
	st, err := newStore(tmp)
	if err != nil {
		return res, err
	}
	// One process first creates the store, as the first agent would.
	s0, _, err := t.start(ctx, st)
	if err != nil {
		return res, err
	}
	s0.close()
	sessions := make([]*session, cfg.procs)
	for i := range sessions {
		if sessions[i], _, err = t.start(ctx, st); err != nil {
			for _, s := range sessions[:i] {
				s.close()
			}
			return res, err
		}
	}
	defer func() {
		for _, s := range sessions {
			s.close()
		}
	}()
	work := make([][]fact, cfg.procs)
	for p := range work {
		work[p] = makeFacts(cfg.seed+int64(100+p), cfg.perProc)
		for i := range work[p] {
			work[p][i].key = fmt.Sprintf("proc%d-%s", p, work[p][i].key)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for p, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for _, fc := range work[p] {
				tool, args := writeCall(fl, fc, cfg.writeType)
				cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
				err := s.call(cctx, tool, args)
				cancel()
				mu.Lock()
				if err != nil {
					res.errors++
					if res.firstErr == "" {
						res.firstErr = err.Error()
					}
				} else {
					res.records++
				}
				mu.Unlock()
			}
		}()
	}
	begin := time.Now()
	close(gate)
	wg.Wait()
	res.wall = time.Since(begin)
	return res, nil
}

func writeCompare(w io.Writer, cfg config, all []figures) error {
	var b strings.Builder
	m := describeMachine()
	fmt.Fprintf(&b, "### Side by side at %s records\n\n", thousands(cfg.n))
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s, %s. ", m.cpu, m.cpus, m.platform, m.goVersion)
	fmt.Fprintf(&b, "Each server starts on an empty store; %s records are written through MCP (timed: write), then %d searches and %d reads by name of random written records. ",
		thousands(cfg.n), cfg.ops, cfg.ops)
	fmt.Fprintf(&b, "Initialize is %d processes, each on a fresh store, timed from start to the initialize result. ", cfg.starts)
	if cfg.procs > 0 {
		fmt.Fprintf(&b, "Concurrent: %d server processes on one store, each with its own client writing %d new records as fast as answered.", cfg.procs, cfg.perProc)
	}
	b.WriteString("\n\n| server | initialize p50 | write p50 | write p99 | search p50 | search p99 | read p50 | read p99 | peak RSS |")
	if cfg.procs > 0 {
		fmt.Fprintf(&b, " %d processes: writes/s | errors |", cfg.procs)
	}
	b.WriteString("\n|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	if cfg.procs > 0 {
		b.WriteString("--:|--:|")
	}
	b.WriteString("\n")
	var notes []string
	for _, f := range all {
		rss := mib(f.peakRSS)
		if f.rssNote != "" {
			rss = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |", f.name, pct(f.initialize, 50),
			pct(f.writes, 50), pct(f.writes, 99), pct(f.searches, 50), pct(f.searches, 99), pct(f.reads, 50), pct(f.reads, 99), rss)
		if cfg.procs > 0 {
			c := f.concurrent
			fmt.Fprintf(&b, " %.0f | %d |", float64(c.records)/c.wall.Seconds(), c.errors)
			if c.firstErr != "" {
				notes = append(notes, fmt.Sprintf("%s, concurrent writes: first error: %s", f.name, clipTo(c.firstErr, 200)))
			}
		}
		b.WriteString("\n")
		if f.noRead != "" {
			notes = append(notes, f.name+": reads not measured: "+f.noRead)
		}
		if f.rssSplit != "" {
			notes = append(notes, f.name+": resident at the end of the reads: "+f.rssSplit)
		}
		if f.writeErrs > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d writes refused (not timed)", f.name, f.writeErrs))
		}
	}
	if len(all) > 1 {
		b.WriteString("\nmemory-mcp over the fastest peer (≤ 1.00 is ahead):\n\n")
		b.WriteString("| initialize | write p50 | search p50 | read p50 | peak RSS |")
		if cfg.procs > 0 {
			b.WriteString(" time per concurrent write |")
		}
		b.WriteString("\n|--:|--:|--:|--:|--:|")
		if cfg.procs > 0 {
			b.WriteString("--:|")
		}
		b.WriteString("\n|")
		// The do-nothing server is the floor, not a peer to lead.
		us, peers := all[0], slices.DeleteFunc(slices.Clone(all[1:]), func(f figures) bool { return f.name == nothingName })
		ratio := func(get func(figures) (float64, bool)) string {
			mine, ok := get(us)
			if !ok {
				return "–"
			}
			best := 0.0
			for _, p := range peers {
				if v, ok := get(p); ok && (best == 0 || v < best) {
					best = v
				}
			}
			if best == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", mine/best)
		}
		p50 := func(sel func(figures) []time.Duration) func(figures) (float64, bool) {
			return func(f figures) (float64, bool) {
				d := sel(f)
				if len(d) == 0 {
					return 0, false
				}
				return float64(p(d, 50)), true
			}
		}
		fmt.Fprintf(&b, " %s | %s | %s | %s | %s |",
			ratio(p50(func(f figures) []time.Duration { return f.initialize })),
			ratio(p50(func(f figures) []time.Duration { return f.writes })),
			ratio(p50(func(f figures) []time.Duration { return f.searches })),
			ratio(p50(func(f figures) []time.Duration { return f.reads })),
			ratio(func(f figures) (float64, bool) { return float64(f.peakRSS), f.rssNote == "" }))
		if cfg.procs > 0 {
			// Inverted, so that lower is better here too.
			fmt.Fprintf(&b, " %s |", ratio(func(f figures) (float64, bool) {
				if f.concurrent.records == 0 {
					return 0, false
				}
				return f.concurrent.wall.Seconds() / float64(f.concurrent.records), true
			}))
		}
		b.WriteString("\n")
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// p is percentile over an unsorted sample.
func p(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, q)
}

func pct(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "–"
	}
	return ms(p(d, q))
}
