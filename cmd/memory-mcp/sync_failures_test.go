package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory/team"
)

// freeAddr is a loopback address no one listens on, for a server that
// must come back where it was.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// importFacts writes n tenant facts on e in one import.
func importFacts(t *testing.T, e env, prefix string, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"scope":"tenant","type":"semantic","key":"%s-%05d","body":"imported fact %d"}`+"\n", prefix, i, i)
	}
	f := filepath.Join(t.TempDir(), "facts.jsonl")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runCLI(t, e, "", "import", f); err != nil {
		t.Fatalf("import: %v %s", err, errOut)
	}
}

// While the server is down a round fails with one line and keeps its
// changes; once it is back, they go, once.
func TestSyncServerDownThenBack(t *testing.T) {
	onBoth(t, testServerDownThenBack)
}

func testServerDownThenBack(t *testing.T, tm *syncTeam) {
	s := tm.servers[0]
	alice := machineAt(t, s.url, tm.token("acme", "alice"))
	bob := machineAt(t, tm.servers[len(tm.servers)-1].url, tm.token("acme", "bob"))
	s.stop(t)

	put(t, alice, "tenant", "offline", "Written while the server was down.")
	line := syncFails(t, alice)
	if !strings.Contains(line, "unreachable") || !strings.Contains(line, s.url) {
		t.Errorf("sync with the server down says %q", line)
	}
	st, _ := status(t, alice)
	if st.Pending != 1 || st.LastSync != nil {
		t.Errorf("after a failed round: pending %d, last sync %v", st.Pending, st.LastSync)
	}
	if out, _, _ := runCLI(t, alice, "", "doctor"); !strings.Contains(out, "sync") || !strings.Contains(out, "unreachable") {
		t.Errorf("doctor does not report the failing sync:\n%s", out)
	}

	tm.restart(0)
	if n := syncOK(t, alice); n.Pushed != 1 {
		t.Errorf("back up, alice pushed %d", n.Pushed)
	}
	if st, _ := status(t, alice); st.Pending != 0 || st.LastSync == nil {
		t.Errorf("after the server came back: %+v", st)
	}
	if n := syncOK(t, bob); n.Pulled != 1 || body(t, bob, "tenant", "offline") == "" {
		t.Errorf("bob pulled %+v", n)
	}

	// The last round went well, but the server is gone now: doctor asks
	// it, rather than vouching for it from the last round.
	tm.servers[0].stop(t)
	if out, _, _ := runCLI(t, alice, "", "doctor"); !strings.Contains(out, "unreachable") {
		t.Errorf("doctor with the server down after a good round:\n%s", out)
	}
}

// dropFirstPushAnswer is a proxy in front of a team server that forwards
// every request, and for the first push drops the answer after the server
// has given it: the connection closes with nothing said.
type dropFirstPushAnswer struct {
	target  string
	dropped atomic.Int32
	stored  atomic.Int32 // pushes the server answered 200
}

func (p *dropFirstPushAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequest(r.Method, p.target+r.URL.RequestURI(), r.Body)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if r.URL.Path == team.PushPath && resp.StatusCode == http.StatusOK {
		p.stored.Add(1)
		if p.dropped.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}

// A push whose answer is lost is pushed again, recognised by its ids and
// applied once; only the answer marks it sent.
func TestSyncLostAnswerDeliveredOnce(t *testing.T) {
	onBoth(t, testLostAnswer)
}

func testLostAnswer(t *testing.T, tm *syncTeam) {
	s := tm.servers[0]
	proxy := &dropFirstPushAnswer{target: s.url}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: proxy}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	alice := machineAt(t, "http://"+ln.Addr().String(), tm.token("acme", "alice"))
	bob := tm.machine(tm.token("acme", "bob"))
	put(t, alice, "tenant", "once", "Stored exactly once.")
	put(t, alice, "tenant", "twice", "Also exactly once.")
	syncFails(t, alice)
	if proxy.stored.Load() != 1 {
		t.Fatalf("the server answered %d pushes", proxy.stored.Load())
	}
	if st, _ := status(t, alice); st.Pending != 2 {
		t.Errorf("with the answer lost, %d changes are pending, want 2 (not marked sent)", st.Pending)
	}
	// Meanwhile bob sees them already: the server had stored them.
	if n := syncOK(t, bob); n.Pulled != 2 {
		t.Errorf("bob pulled %d", n.Pulled)
	}
	put(t, alice, "tenant", "after", "Written after the lost answer.")
	if n := syncOK(t, alice); n.Pushed != 3 {
		t.Errorf("the second round pushed %d, want 3 (2 again, recognised, and 1 new)", n.Pushed)
	}
	if st, _ := status(t, alice); st.Pending != 0 || len(st.Conflicts) != 0 {
		t.Errorf("after the second round: %+v", st)
	}
	if n := syncOK(t, bob); n.Pulled != 1 {
		t.Errorf("bob pulled %d more, want only the new one", n.Pulled)
	}
	fresh := tm.machine(tm.token("acme", "carl"))
	if n := syncOK(t, fresh); n.Pulled != 3 {
		t.Errorf("a new machine pulled %d changes, want 3: a repeated push was stored twice", n.Pulled)
	}
}

// A revoked token is refused at once, with one line saying so; nothing is
// marked sent.
func TestSyncRevokedToken(t *testing.T) {
	onBoth(t, testRevokedToken)
}

func testRevokedToken(t *testing.T, tm *syncTeam) {
	alice := tm.machine(tm.token("acme", "alice", "--name", "alices-laptop"))
	put(t, alice, "tenant", "before", "Sent before the revocation.")
	syncOK(t, alice)
	out, _, err := runCLI(t, tm.srv, "", "token", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, `"id": "tok_`)
	if i < 0 {
		t.Fatalf("token list: %s", out)
	}
	id := out[i+7 : i+7+len("tok_")+12]
	if _, errOut, err := runCLI(t, tm.srv, "", "token", "revoke", id); err != nil {
		t.Fatalf("revoke %s: %v %s", id, err, errOut)
	}
	put(t, alice, "tenant", "after", "Written after the revocation.")
	line := syncFails(t, alice)
	if !strings.Contains(line, "refused the token") {
		t.Errorf("sync with a revoked token says %q", line)
	}
	st, text := status(t, alice)
	if st.Pending != 1 {
		t.Errorf("pending %d after the refusal", st.Pending)
	}
	if strings.Contains(text, "mem_") {
		t.Errorf("sync status shows a token:\n%s", text)
	}
}

// Ten thousand changes reach a new machine; a server killed in the middle
// of a pull and started again lets it resume, nothing lost and nothing
// applied twice.
func TestSyncTenThousandAndServerRestartMidPull(t *testing.T) {
	onBoth(t, testTenThousand)
}

func testTenThousand(t *testing.T, tm *syncTeam) {
	s := tm.servers[0]
	const n = 10000
	seed(t, s.url, tm.token("acme", "alice"), "bulk", n)

	first := tm.machine(tm.token("acme", "bob"))
	if got := syncOK(t, first); got.Pulled != n {
		t.Errorf("a new machine pulled %d changes, want %d", got.Pulled, n)
	}
	if got := recordCount(t, first); got != n {
		t.Errorf("it holds %d records", got)
	}

	second := machineAt(t, s.url, tm.token("acme", "carol"))
	cmd := second.command("sync", "--json")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !killed; time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			t.Logf("the pull finished before the server could be killed")
			killed = true
			done <- nil
		default:
			if st, _ := status(t, second); st.Cursor > 0 {
				s.cmd.Process.Kill()
				<-s.exited
				killed = true
			}
		}
	}
	err := <-done
	before := recordCount(t, second)
	if err != nil {
		if lines := strings.Split(strings.TrimSpace(errOut.String()), "\n"); len(lines) != 1 {
			t.Errorf("the sync cut off by the server's death says:\n%s", errOut.String())
		}
		if before == 0 || before >= n {
			t.Logf("the server died with %d of %d applied", before, n)
		}
	}
	tm.restart(0)
	again := syncOK(t, second)
	if before+again.Pulled != n {
		t.Errorf("applied %d before the restart and %d after, want %d in all", before, again.Pulled, n)
	}
	if got := recordCount(t, second); got != n {
		t.Errorf("after the restart the machine holds %d records, want %d", got, n)
	}
}

// A machine killed (SIGKILL) in the middle of a push, and one killed in
// the middle of a pull, resume where they stopped: every change reaches
// the server once, and every pulled change is applied once.
func TestSyncKilledMidPushAndMidPull(t *testing.T) {
	onBoth(t, testKilledMid)
}

func testKilledMid(t *testing.T, tm *syncTeam) {
	alice := tm.machine(tm.token("acme", "alice"))
	const n = 4000
	importFacts(t, alice, "pushed", n)
	killMid(t, alice, func() bool {
		for _, s := range tm.servers {
			if strings.Contains(s.stderr.String(), "http=POST") {
				return true
			}
		}
		return false
	})
	if got := syncOK(t, alice); got.Pushed > n {
		t.Errorf("the resumed push stored %d changes of %d", got.Pushed, n)
	}
	if st, _ := status(t, alice); st.Pending != 0 {
		t.Errorf("after resuming, %d pending", st.Pending)
	}

	bob := tm.machine(tm.token("acme", "bob"))
	killMid(t, bob, func() bool {
		st, _ := status(t, bob)
		return st.Cursor > 0
	})
	before := recordCount(t, bob)
	got := syncOK(t, bob)
	if before+got.Pulled != n {
		t.Errorf("bob applied %d before the kill and %d after, want %d in all: the log holds each change once", before, got.Pulled, n)
	}
	if c := recordCount(t, bob); c != n {
		t.Errorf("bob holds %d records, want %d", c, n)
	}
}

// killMid starts a round on e and kills it with SIGKILL once ready says
// it is under way (or lets it finish, if it is quicker).
func killMid(t *testing.T, e env, ready func() bool) {
	t.Helper()
	cmd := e.command("sync")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			t.Logf("the round ended before the kill")
			return
		default:
		}
		if ready() {
			cmd.Process.Kill()
			<-done
			return
		}
	}
	t.Fatal("the round never got under way")
}

// Two rounds at once on one machine (the stdio server's and a hook's
// memory-mcp sync) send each change once: the server holds each write of
// the machine as one change, and a teammate pulls each once.
func TestSyncTwoRoundsAtOnce(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		alice := tm.machine(tm.token("acme", "alice"))
		const n = 40
		for i := range n {
			put(t, alice, "tenant", fmt.Sprintf("fact-%d", i), fmt.Sprintf("Fact %d, written before two rounds at once.", i))
		}
		errs := make(chan string, 2)
		for range 2 {
			go func() {
				out, errOut, err := runCLI(t, alice, "", "sync")
				if err != nil {
					errs <- fmt.Sprintf("%v: %s%s", err, out, errOut)
					return
				}
				errs <- ""
			}()
		}
		for range 2 {
			if e := <-errs; e != "" {
				t.Errorf("a round failed: %s", e)
			}
		}
		if st, _ := status(t, alice); st.Pending != 0 {
			t.Errorf("pending %d after both rounds", st.Pending)
		}
		bob := tm.machine(tm.token("acme", "bob"))
		if got := syncOK(t, bob); got.Pulled != n {
			t.Errorf("bob pulled %d changes, want each of the %d once", got.Pulled, n)
		}
		if c := syncOK(t, alice); c.Pushed != 0 || c.Conflicts != 0 {
			t.Errorf("alice's next round: %+v", c)
		}
	})
}

// The team server's database restored from an older copy: the changes
// pushed since are gone from it, and its log hands out their seqs again
// to other changes. A machine whose cursor was past the copy finds out at
// its next pull, pushes what it holds again and pulls from the start, so
// neither what it wrote nor what others wrote since is lost.
func TestSyncServerRestoredFromAnOlderCopy(t *testing.T) {
	tm := newSyncTeam(t, false)
	alice, bob := tm.machine(tm.token("acme", "alice")), tm.machine(tm.token("acme", "bob"))
	put(t, alice, "tenant", "before", "Written before the copy.")
	syncOK(t, alice)
	copyFiles := func(from, to string) {
		for _, sfx := range []string{"", "-wal", "-shm"} {
			os.Remove(to + sfx)
			b, err := os.ReadFile(from + sfx)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to+sfx, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	tm.servers[0].stop(t)
	saved := filepath.Join(t.TempDir(), "copy.db")
	copyFiles(tm.srv.db, saved)
	tm.restart(0)

	put(t, alice, "tenant", "after-copy", "Written after the copy.")
	syncOK(t, alice)
	syncOK(t, bob)
	wantBody(t, "bob", bob, "tenant", "after-copy", "Written after the copy.")

	tm.servers[0].stop(t)
	copyFiles(saved, tm.srv.db)
	tm.restart(0)
	// Others write on the restored server, past alice's cursor.
	for i := range 3 {
		put(t, bob, "tenant", fmt.Sprintf("restored-%d", i), "Written on the restored server.")
	}
	syncOK(t, bob)

	syncOK(t, alice)
	for i := range 3 {
		wantBody(t, "alice", alice, "tenant", fmt.Sprintf("restored-%d", i), "Written on the restored server.")
	}
	later := tm.machine(tm.token("acme", "carol"))
	syncOK(t, later)
	wantBody(t, "a later machine", later, "tenant", "after-copy", "Written after the copy.")
	wantBody(t, "a later machine", later, "tenant", "before", "Written before the copy.")
}

// A machine joined again with a new token of the same user (the old one
// revoked), after a round against a mistyped URL, keeps what waited: a
// delete made meanwhile still reaches the team, and the deleted record
// does not come back from it.
func TestSyncNewTokenKeepsWhatWaits(t *testing.T) {
	tm := newSyncTeam(t, false)
	alice := tm.machine(tm.token("acme", "alice", "--name", "old-token"))
	bob := tm.machine(tm.token("acme", "bob"))
	put(t, alice, "tenant", "gone-soon", "Deleted while the token was revoked.")
	syncOK(t, alice)
	syncOK(t, bob)
	out, _, err := runCLI(t, tm.srv, "", "token", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var toks []struct{ ID, Name string }
	if err := json.Unmarshal([]byte(out), &toks); err != nil {
		t.Fatal(err)
	}
	for _, k := range toks {
		if k.Name == "old-token" {
			if _, errOut, err := runCLI(t, tm.srv, "", "token", "revoke", k.ID); err != nil {
				t.Fatalf("revoke: %v %s", err, errOut)
			}
		}
	}
	remove(t, alice, "tenant", "gone-soon")
	put(t, alice, "tenant", "new", "Written while the token was revoked.")
	syncFails(t, alice)

	fresh := tm.token("acme", "alice", "--name", "new-token")
	typo := alice
	typo.extra = []string{"PROMETHEUS_MEMORY_TEAM_URL=http://" + freeAddr(t), "PROMETHEUS_MEMORY_TEAM_TOKEN=" + fresh}
	syncFails(t, typo)
	alice.extra = []string{"PROMETHEUS_MEMORY_TEAM_URL=" + tm.servers[0].url, "PROMETHEUS_MEMORY_TEAM_TOKEN=" + fresh}
	syncOK(t, alice)
	syncOK(t, bob)
	wantBody(t, "bob", bob, "tenant", "gone-soon", "")
	wantBody(t, "bob", bob, "tenant", "new", "Written while the token was revoked.")
	wantBody(t, "alice", alice, "tenant", "gone-soon", "")
}
