package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
)

// startClient is connect for use off the test goroutine: it returns its
// failure instead of ending the test.
func startClient(ctx context.Context, e env) (*mcp.ClientSession, *lockedBuffer, error) {
	cmd := e.command()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "robust", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, stderr, fmt.Errorf("connect: %w\nstderr: %s", err, stderr.String())
	}
	return cs, stderr, nil
}

// callTool calls a tool and returns its structured content, or an error for
// a protocol failure or a tool error.
func callTool(ctx context.Context, cs *mcp.ClientSession, tool string, args any) (map[string]any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: tool error: %s", tool, text(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: structured content: %w", tool, err)
	}
	return out, nil
}

// openDB opens the database file directly, as a second party would.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func integrityCheck(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var m string
		rows.Scan(&m)
		msgs = append(msgs, m)
	}
	if len(msgs) != 1 || msgs[0] != "ok" {
		t.Fatalf("integrity_check: %v", msgs)
	}
}

func projectOf(t *testing.T, e env) scope.Identity {
	t.Helper()
	root, err := scope.Root(e.root, "")
	if err != nil {
		t.Fatal(err)
	}
	return scope.IdentityOf(root)
}

type dbRecord struct{ id, typ, body string }

// mirroredInDB returns the project's semantic and procedural records by key.
func mirroredInDB(t *testing.T, db *sql.DB, p scope.Identity) map[string]dbRecord {
	t.Helper()
	rows, err := db.Query(`SELECT key, id, type, body FROM records WHERE project = ? AND scope = 0 AND type IN ('semantic', 'procedural')`, string(p))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]dbRecord{}
	for rows.Next() {
		var k string
		var r dbRecord
		if err := rows.Scan(&k, &r.id, &r.typ, &r.body); err != nil {
			t.Fatal(err)
		}
		out[k] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tempFile is the name pattern of mirror.Dir.Write's temporary files.
var tempFile = regexp.MustCompile(`^\..+\.md\.[0-9a-f]{12}\.tmp$`)

// checkMirror compares the memories directory with the database: every
// project fact and procedure has a file that decodes to its id, type and
// body; there is no other .md file; every .md file decodes (none is torn).
// It returns the temporary files it found.
func checkMirror(t *testing.T, e env, db *sql.DB) (temps []string) {
	t.Helper()
	dir := filepath.Join(e.root, ".prometheus", "memories")
	recs := mirroredInDB(t, db, projectOf(t, e))
	entries, err := os.ReadDir(dir)
	if err != nil && !(errors.Is(err, os.ErrNotExist) && len(recs) == 0) {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, en := range entries {
		name := en.Name()
		if tempFile.MatchString(name) {
			temps = append(temps, name)
			continue
		}
		if name == ".tmp" && en.IsDir() {
			continue // where writes keep their temporary files, ignored by git
		}
		stem, isMD := strings.CutSuffix(name, ".md")
		if !isMD || !en.Type().IsRegular() {
			t.Errorf("unexpected entry %s in the memories directory", name)
			continue
		}
		files[stem] = true
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("read %s: %v", name, err)
			continue
		}
		got, err := mirror.Decode(stem, data)
		if err != nil {
			t.Errorf("%s does not decode (torn?): %v", name, err)
			continue
		}
		want, ok := recs[stem]
		if !ok {
			t.Errorf("%s has no record in the database", name)
			continue
		}
		if got.Body != want.body || got.ID != want.id || string(got.Type) != want.typ {
			t.Errorf("%s holds %s %s %.60q; the database has %s %s %.60q", name, got.ID, got.Type, got.Body, want.id, want.typ, want.body)
		}
	}
	for k := range recs {
		if !files[k] {
			t.Errorf("record %s has no file", k)
		}
	}
	return temps
}

// newFastEnv is newEnv on a memory file system when the machine has one
// (/dev/shm), so that thousands of fsyncs do not dominate tests about
// concurrency and crashes: SIGKILL does not lose what the kernel holds,
// so a tmpfs loses nothing these tests look for.
func newFastEnv(t *testing.T) env {
	t.Helper()
	base := "/dev/shm"
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		return newEnv(t)
	}
	dir, err := os.MkdirTemp(base, "memory-mcp-robust-")
	if err != nil {
		return newEnv(t)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home, root := filepath.Join(dir, "home"), filepath.Join(dir, "workspace")
	for _, d := range []string{home, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return env{home: home, db: filepath.Join(home, ".prometheus", "memory.db"), root: root}
}

// ack is one acknowledged write.
type ack struct {
	typ, scope, key, body string
}

// TestManyServersOneDatabase runs 8 server processes, each with a real MCP
// client, on one database and one workspace. Each writes records (a
// quarter of them to keys every process writes, half of them mirrored
// project facts and procedures) while reading, searching and listing: 150
// each by default, 500 with -robust.full (about 4 CPU-minutes). No call may
// fail; afterwards every acknowledged write is there, and the markdown
// files match the database exactly.
func TestManyServersOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("8 processes, 1,200 writes")
	}
	procs, writes := 8, 150
	if *fullRobust {
		writes = 500
	}
	e := newFastEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	sessions := make([]*mcp.ClientSession, procs)
	stderrs := make([]*lockedBuffer, procs)
	for i := range sessions {
		cs, stderr, err := startClient(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		sessions[i], stderrs[i] = cs, stderr
	}

	type result struct {
		acks  []ack
		errs  []string
		reads int
	}
	results := make([]result, procs)
	var wg sync.WaitGroup
	start := time.Now()
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, res := sessions[p], &results[p]
			for i := range writes {
				n := i / 4 % 25
				var a ack
				switch i % 4 {
				case 0: // shared by every process
					a = ack{"semantic", "project", fmt.Sprintf("shared-%02d", n), ""}
				case 1:
					a = ack{"semantic", "project", fmt.Sprintf("w%d-fact-%02d", p, n), ""}
				case 2:
					a = ack{"procedural", "project", fmt.Sprintf("w%d-how-%02d", p, n), ""}
				case 3:
					if n%2 == 0 {
						a = ack{"working", "project", fmt.Sprintf("w%d-note-%02d", p, n), ""}
					} else {
						a = ack{"semantic", "system", fmt.Sprintf("w%d-global-%02d", p, n), ""}
					}
				}
				a.body = fmt.Sprintf("Written by worker %d as write %d about %s.%s", p, i, a.key, strings.Repeat(" Lorem ipsum dolor sit amet.", i%7))
				_, err := callTool(ctx, cs, "memory_write", map[string]any{"type": a.typ, "scope": a.scope, "key": a.key, "body": a.body, "description": "write " + fmt.Sprint(i)})
				if err != nil {
					res.errs = append(res.errs, err.Error())
				} else {
					res.acks = append(res.acks, a)
				}
				if i%4 != 0 {
					continue
				}
				var rerr error
				switch i / 4 % 4 {
				case 0:
					_, rerr = callTool(ctx, cs, "memory_read", map[string]any{"key": a.key, "type": a.typ, "scope": a.scope})
				case 1:
					_, rerr = callTool(ctx, cs, "memory_search", map[string]any{"query": fmt.Sprintf("worker %d write %d", p, i)})
				case 2:
					_, rerr = callTool(ctx, cs, "memory_list", map[string]any{"limit": 20})
				case 3:
					if i%64 == 12 {
						_, rerr = callTool(ctx, cs, "memory_read", map[string]any{"query": "lorem"})
					} else {
						_, rerr = callTool(ctx, cs, "memory_read", map[string]any{"key": "shared-00", "type": "semantic"})
						if rerr != nil && strings.Contains(rerr.Error(), "not_found") {
							rerr = nil // before anyone wrote it
						}
					}
				}
				res.reads++
				if rerr != nil {
					res.errs = append(res.errs, rerr.Error())
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, cs := range sessions {
		if err := cs.Close(); err != nil {
			t.Logf("close session %d: %v", i, err)
		}
	}

	totalAcks, totalReads, totalErrs := 0, 0, 0
	var known []string
	last := map[string]ack{}          // by scope/type/key: the last write acknowledged for a key written by one process
	sharedBodies := map[string]bool{} // every body acknowledged for a shared key
	for p, r := range results {
		totalAcks += len(r.acks)
		totalReads += r.reads
		for _, msg := range r.errs {
			if knownRace(msg) {
				known = append(known, msg)
				continue
			}
			totalErrs++
			if totalErrs <= 10 {
				t.Errorf("worker %d: %s", p, msg)
			}
		}
		for _, a := range r.acks {
			id := a.scope + "/" + a.typ + "/" + a.key
			if strings.HasPrefix(a.key, "shared-") {
				sharedBodies[a.body] = true
			}
			last[id] = a
		}
	}
	if t.Failed() {
		for p, s := range stderrs {
			if strings.Contains(s.String(), "level=ERROR") {
				t.Logf("server %d stderr:\n%s", p, clipLog(s.String()))
			}
		}
	}

	// A fresh server syncs and sees everything.
	cs, _, err := startClient(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	cursor := ""
	for {
		args := map[string]any{"limit": 100}
		if cursor != "" {
			args["cursor"] = cursor
		}
		out, err := callTool(ctx, cs, "memory_list", args)
		if err != nil {
			t.Fatal(err)
		}
		if ps := problemPaths(out); len(ps) > 0 {
			t.Errorf("the fresh server reports problems: %v", ps)
		}
		seen += len(out["records"].([]any))
		next, _ := out["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	cs.Close()

	db := openDB(t, e.db)
	integrityCheck(t, db)
	found := 0
	for _, a := range last {
		var body string
		err := db.QueryRow(`SELECT body FROM records WHERE scope = ? AND type = ? AND key = ?`, map[string]int{"project": 0, "system": 3}[a.scope], a.typ, a.key).Scan(&body)
		switch {
		case err != nil:
			t.Errorf("acknowledged %s %s %s is missing: %v", a.scope, a.typ, a.key, err)
		case strings.HasPrefix(a.key, "shared-") && !sharedBodies[body]:
			t.Errorf("shared key %s holds a body nobody was told was written: %.80q", a.key, body)
		case !strings.HasPrefix(a.key, "shared-") && body != a.body:
			t.Errorf("%s holds %.80q, not the last acknowledged %.80q", a.key, body, a.body)
		default:
			found++
		}
	}
	if seen != len(last) {
		t.Errorf("a fresh client lists %d records; %d distinct keys were acknowledged", seen, len(last))
	}
	if temps := checkMirror(t, e, db); len(temps) > 0 {
		t.Errorf("temporary files left after clean shutdowns: %v", temps)
	}
	files := len(mirroredInDB(t, db, projectOf(t, e)))
	t.Logf("%d processes: %d writes acknowledged of %d sent, %d reads, %d errors, in %v; %d distinct keys acknowledged, %d found with the last acknowledged body (shared keys: an acknowledged body); %d markdown files match the database; a fresh client lists %d",
		procs, totalAcks, procs*writes, totalReads, totalErrs+len(known), elapsed.Round(time.Millisecond), len(last), found, files, seen)
	if len(known) > 0 {
		regressed(t, "%d calls failed with a symptom of the search and sync races, e.g. %q", len(known), known[0])
	}
}

// fullRobust runs the long robustness tests at their full size.
var fullRobust = flag.Bool("robust.full", false, "run TestManyServersOneDatabase at full size (8 processes × 500 writes)")

// knownRace reports the symptoms of two races fixed once already: a search
// failing with a bare not_found when a matched record was deleted before
// its row was fetched, and a record read as not_found because another
// process's sync took its brand-new file for a removed one. They are
// counted apart so that a regression names its cause.
func knownRace(msg string) bool {
	return strings.HasPrefix(msg, "memory_search: tool error: not_found") ||
		strings.HasPrefix(msg, "memory_read: tool error: not_found")
}

// regressed fails a test that has shown the symptom of a race fixed
// once already (a sync deleting a record whose file was just written, a
// search failing on a match deleted meanwhile).
func regressed(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Errorf("regression: "+format, args...)
}

// TestSimultaneousStart starts two servers (and a `read` hook) on a fresh
// database at the same moment, many times over: all come up, whichever
// creates and migrates the database, and each sees the other's writes.
func TestSimultaneousStart(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for round := range rounds {
		e := newFastEnv(t)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		sessions := make([]*mcp.ClientSession, 2)
		errs := make([]error, 3)
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				sessions[i], _, errs[i] = startClient(ctx, e)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			cmd := e.command("read")
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[2] = fmt.Errorf("read: %v: %s", err, out)
			}
		}()
		close(gate)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, starter %d: %v", round, i, err)
			}
		}
		if t.Failed() {
			for _, cs := range sessions {
				if cs != nil {
					cs.Close()
				}
			}
			t.FailNow()
		}
		for i, cs := range sessions {
			if _, err := callTool(ctx, cs, "memory_write", map[string]any{"type": "semantic", "key": fmt.Sprintf("from-%d", i), "body": fmt.Sprintf("server %d", i)}); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		for i, cs := range sessions {
			other := fmt.Sprintf("from-%d", 1-i)
			if out, err := callTool(ctx, cs, "memory_read", map[string]any{"key": other}); err != nil {
				t.Errorf("round %d: server %d reading %s: %v", round, i, other, err)
			} else if out["record"].(map[string]any)["body"] != fmt.Sprintf("server %d", 1-i) {
				t.Errorf("round %d: server %d reads %v", round, i, out["record"])
			}
			cs.Close()
		}
	}
	t.Logf("%d rounds of simultaneous start on a fresh database: all came up", rounds)
}

// crashServer is a server driven over raw JSON lines so that the test
// knows exactly which answers arrived before it was killed.
type crashServer struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	mu     sync.Mutex
	got    map[string]map[string]any // answers by id
	ready  chan struct{}             // closed when initialize is answered
	closed chan struct{}             // closed when stdout ends
	stderr *lockedBuffer
}

func startCrashServer(t *testing.T, e env) *crashServer {
	t.Helper()
	cmd := e.command()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	s := &crashServer{cmd: cmd, in: in, got: map[string]map[string]any{}, ready: make(chan struct{}), closed: make(chan struct{}), stderr: &lockedBuffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.closed)
		r := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				idb, _ := json.Marshal(m["id"])
				s.mu.Lock()
				s.got[string(idb)] = m
				s.mu.Unlock()
				if string(idb) == `"init"` {
					close(s.ready)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	io.WriteString(in, strings.Replace(initLine, `"id":1`, `"id":"init"`, 1)+"\n")
	return s
}

func waitAnswer(s *crashServer, id string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, ok := s.answer(id); ok {
			return true
		}
		select {
		case <-s.closed:
			_, ok := s.answer(id)
			return ok
		case <-time.After(2 * time.Millisecond):
		}
	}
	return false
}

func (s *crashServer) answer(id string) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.got[id]
	return m, ok
}

// kill sends SIGKILL and waits until the process is gone and every byte it
// wrote has been read.
func (s *crashServer) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.closed
	s.cmd.Wait()
}

// TestKillDuringWrites kills a server with SIGKILL in the middle of a
// burst of writes, 50 times over on one database and workspace. After
// every kill the database passes integrity_check, every write answered
// before the kill is in it, no markdown file is torn, and the next server
// starts cleanly. Temporary files a kill leaves are ignored by the next
// sync and swept once they are stale.
func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("50 crashes")
	}
	const rounds, burst, keys = 50, 24, 60
	e := newFastEnv(t)
	dir := filepath.Join(e.root, ".prometheus", "memories")
	rng := rand.New(rand.NewPCG(1, 2))
	state := map[string]string{} // key -> the body it must hold (last acknowledged)
	var forgotten []string       // acknowledged records the sync race deleted, their files intact
	totalAcked, totalSent, partial, tempsSeen := 0, 0, 0, map[string]bool{}
	for round := range rounds {
		s := startCrashServer(t, e)
		select {
		case <-s.ready:
		case <-s.closed:
			t.Fatalf("round %d: the server did not start after the previous kill\nstderr: %s", round, s.stderr.String())
		case <-time.After(30 * time.Second):
			s.kill()
			t.Fatalf("round %d: no answer to initialize\nstderr: %s", round, s.stderr.String())
		}
		if m, _ := s.answer(`"init"`); m["result"] == nil {
			t.Fatalf("round %d: initialize: %v", round, m)
		}
		io.WriteString(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		// A first call syncs: files a kill left ahead of the database are
		// imported before the burst, as they would be before any read.
		io.WriteString(s.in, `{"jsonrpc":"2.0","id":"sync","method":"tools/call","params":{"name":"memory_list","arguments":{"limit":1}}}`+"\n")
		if !waitAnswer(s, `"sync"`, 30*time.Second) {
			s.kill()
			t.Fatalf("round %d: no answer to the first call\nstderr: %s", round, s.stderr.String())
		}
		if m, _ := s.answer(`"sync"`); m["result"] == nil || m["result"].(map[string]any)["isError"] == true {
			t.Fatalf("round %d: first call after a kill: %v", round, m)
		} else if ps := problemPaths(m["result"].(map[string]any)["structuredContent"].(map[string]any)); len(ps) > 0 {
			t.Errorf("round %d: the sync after a kill reports problems: %v", round, ps)
		}
		type sent struct{ id, key, typ, body string }
		var batch []sent
		perm := rng.Perm(keys)[:burst]
		var lines strings.Builder
		for i, k := range perm {
			typ := "semantic"
			if k%3 == 0 {
				typ = "procedural"
			}
			key := fmt.Sprintf("crash-%02d", k)
			// No trailing newline: the file format trims it, the store keeps it
			// (see the report), and the test compares the two exactly.
			body := fmt.Sprintf("Round %d write %d to %s.\n\n%s", round, i, key, strings.TrimSpace(strings.Repeat(fmt.Sprintf("line %d of round %d\n", i, round), 20+rng.IntN(400))))
			id := fmt.Sprintf(`"r%d-w%d"`, round, i)
			batch = append(batch, sent{id, key, typ, body})
			b, _ := json.Marshal(map[string]any{"type": typ, "key": key, "body": body})
			fmt.Fprintf(&lines, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"memory_write","arguments":%s}}`+"\n", id, b)
		}
		go io.WriteString(s.in, lines.String())
		time.Sleep(time.Duration(2+rng.IntN(100)) * time.Millisecond)
		s.kill()

		acked := 0
		for _, w := range batch {
			m, ok := s.answer(w.id)
			if !ok {
				continue
			}
			if r, _ := m["result"].(map[string]any); r == nil || r["isError"] == true {
				t.Errorf("round %d: write %s failed: %v", round, w.key, m)
				continue
			}
			acked++
			state[w.key] = w.body
		}
		totalAcked += acked
		totalSent += len(batch)
		if acked > 0 && acked < len(batch) {
			partial++
		}

		db := openDB(t, e.db)
		integrityCheck(t, db)
		inDB := mirroredInDB(t, db, projectOf(t, e))
		unacked := map[string]string{}
		for _, w := range batch {
			if _, ok := s.answer(w.id); !ok {
				unacked[w.key] = w.body
			}
		}
		for k, body := range state {
			got, ok := inDB[k]
			switch {
			case !ok:
				data, ferr := os.ReadFile(filepath.Join(dir, k+".md"))
				onDisk := "no file"
				if ferr == nil {
					logged := strings.Contains(s.stderr.String(), `record deleted" path=.prometheus/memories/`+k+".md key="+k)
					rec, err := mirror.Decode(k, data)
					switch {
					case err != nil || rec.Body != body:
						onDisk = "its file holds something else"
					case !logged:
						onDisk = "its file holds the acknowledged body, but no sync logged deleting it"
					default:
						// A sync run by one request took the file another
						// request had just written for a removed one (the
						// sync race, see knownRace; the server logged the
						// deletion); the file is intact and the next sync
						// imports it again, as checked below.
						forgotten = append(forgotten, fmt.Sprintf("round %d: %s", round, k))
						continue
					}
				}
				t.Errorf("round %d: acknowledged %s is not in the database (%s)", round, k, onDisk)
			case got.body != body && got.body != unacked[k]:
				t.Errorf("round %d: %s holds %.50q, want the acknowledged %.50q", round, k, got.body, body)
			}
			data, err := os.ReadFile(filepath.Join(dir, k+".md"))
			if err != nil {
				t.Errorf("round %d: acknowledged %s has no file: %v", round, k, err)
			} else if rec, err := mirror.Decode(k, data); err == nil && rec.Body != body && rec.Body != unacked[k] {
				t.Errorf("round %d: %s.md holds %.50q, want the acknowledged %.50q", round, k, rec.Body, body)
			}
		}
		// Every file decodes, and holds what the database holds, or a write
		// the kill cut off after its file was renamed into place (the next
		// sync imports it: the file wins).
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			name := en.Name()
			if tempFile.MatchString(name) {
				t.Errorf("round %d: the kill left temporary file %s in the memories directory, where git would pick it up", round, name)
				continue
			}
			if name == ".tmp" {
				tmps, _ := os.ReadDir(filepath.Join(dir, name))
				for _, tf := range tmps {
					if tempFile.MatchString(tf.Name()) {
						tempsSeen[tf.Name()] = true
					}
				}
				continue
			}
			stem := strings.TrimSuffix(name, ".md")
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("round %d: %v", round, err)
				continue
			}
			rec, err := mirror.Decode(stem, data)
			if err != nil {
				t.Errorf("round %d: %s is torn: %v", round, name, err)
				continue
			}
			if want, ok := inDB[stem]; ok && rec.Body != want.body && rec.Body != unacked[stem] {
				t.Errorf("round %d: %s holds %.50q; the database %.50q", round, name, rec.Body, want.body)
			}
		}
		db.Close()
		if t.Failed() {
			t.Logf("server stderr:\n%s", clipLog(s.stderr.String()))
			t.FailNow()
		}
		// A write cut off after its file was renamed but before its commit
		// is a file the next sync imports; count it as the key's state.
		for k, body := range unacked {
			if b, err := os.ReadFile(filepath.Join(dir, k+".md")); err == nil {
				if rec, err := mirror.Decode(k, b); err == nil && rec.Body == body {
					state[k] = body
				}
			}
		}
	}

	// Leftover temporary files, all in .tmp where git ignores them: the
	// next sync must neither import nor report them, and must sweep them
	// once they are stale.
	tmpDir := filepath.Join(dir, ".tmp")
	entries, _ := os.ReadDir(tmpDir)
	var leftover []string
	for _, en := range entries {
		if tempFile.MatchString(en.Name()) {
			leftover = append(leftover, en.Name())
		}
	}
	cs := connect(t, e, nil)
	out := ok(t, cs, "memory_list", map[string]any{"limit": 100})
	if ps := problemPaths(out); len(ps) > 0 {
		t.Errorf("after the crashes the server reports problems: %v", ps)
	}
	for _, name := range leftover {
		if _, err := os.Stat(filepath.Join(tmpDir, name)); err != nil {
			t.Errorf("fresh temporary file %s was removed: %v", name, err)
		}
		old := time.Now().Add(-2 * time.Hour)
		os.Chtimes(filepath.Join(tmpDir, name), old, old)
	}
	cs.Close()
	cs = connect(t, e, nil) // the export check runs once per process start
	ok(t, cs, "memory_list", map[string]any{"limit": 100})
	for k, body := range state {
		if got := bodyOf(t, cs, k); got != body {
			t.Errorf("after the crashes %s reads %.50q, want %.50q", k, got, body)
		}
	}
	cs.Close()
	db := openDB(t, e.db)
	integrityCheck(t, db)
	if temps := checkMirror(t, e, db); len(temps) > 0 {
		t.Errorf("temporary files in the memories directory: %v", temps)
	}
	entries, _ = os.ReadDir(tmpDir)
	for _, en := range entries {
		if tempFile.MatchString(en.Name()) {
			t.Errorf("stale temporary file %s was not swept", en.Name())
		}
	}
	t.Logf("%d kills survived; %d of %d writes were acknowledged before a kill (%d rounds cut a burst in the middle), all found; %d temporary files left by kills over the run, %d there at the end, ignored by sync and swept once stale",
		rounds, totalAcked, totalSent, partial, len(tempsSeen), len(leftover))
	if len(forgotten) > 0 {
		regressed(t, "%d acknowledged records were deleted by a sync in a concurrent request and restored from their files by the next sync: %v", len(forgotten), forgotten)
	}
}
