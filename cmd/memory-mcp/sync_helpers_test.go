package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/memory/team"
)

// syncTeam is a real team server (one on SQLite, or two replicas on one
// PostgreSQL database) and the machines that join it, each with its own
// home, database and workspace, all run as the real binary.
type syncTeam struct {
	t       *testing.T
	srv     env
	servers []*teamServer
	addrs   []string // where each listens, to come back to
	joined  int
}

// newSyncTeam starts the server: two replicas on PostgreSQL when pg.
func newSyncTeam(t *testing.T, pg bool) *syncTeam {
	t.Helper()
	tm := &syncTeam{t: t, srv: newEnv(t)}
	n := 1
	if pg {
		tm.srv, _ = pgEnv(t)
		n = 2
	}
	for range n {
		tm.addrs = append(tm.addrs, freeAddr(t))
		tm.servers = append(tm.servers, startTeamServer(t, tm.srv, "--http", tm.addrs[len(tm.addrs)-1], "--rate", "1000"))
	}
	return tm
}

// restart starts replica i again where it was, after it stopped.
func (tm *syncTeam) restart(i int) {
	tm.servers[i] = startTeamServer(tm.t, tm.srv, "--http", tm.addrs[i], "--rate", "1000")
}

// token makes a token for user of tenant.
func (tm *syncTeam) token(tenant, user string, more ...string) string {
	return newToken(tm.t, tm.srv, append([]string{"--tenant", tenant, "--user", user}, more...)...)
}

// machine is a new machine joined with tok through the environment, to
// the replicas in turn.
func (tm *syncTeam) machine(tok string) env {
	s := tm.servers[tm.joined%len(tm.servers)]
	tm.joined++
	return machineAt(tm.t, s.url, tok)
}

func machineAt(t *testing.T, url, tok string) env {
	e := newEnv(t)
	e.extra = []string{"PROMETHEUS_MEMORY_TEAM_URL=" + url, "PROMETHEUS_MEMORY_TEAM_TOKEN=" + tok}
	return e
}

// syncCounts is what memory-mcp sync --json prints.
type syncCounts struct {
	Pushed, Pulled, Conflicts int
}

// syncOK runs one round, which must succeed.
func syncOK(t *testing.T, e env) syncCounts {
	t.Helper()
	out, errOut, err := runCLI(t, e, "", "sync", "--json")
	if err != nil {
		t.Fatalf("sync: %v\n%s%s", err, out, errOut)
	}
	var n syncCounts
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatalf("sync --json printed %q: %v", out, err)
	}
	return n
}

// syncFails runs one round, which must fail, and returns its one line.
func syncFails(t *testing.T, e env) string {
	t.Helper()
	out, errOut, err := runCLI(t, e, "", "sync")
	if err == nil {
		t.Fatalf("sync succeeded: %s", out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 {
		t.Errorf("a failed sync says more than one line:\n%s", errOut)
	}
	return lines[0]
}

// put writes key at level with body through the command line.
func put(t *testing.T, e env, level, key, body string) {
	t.Helper()
	if out, errOut, err := runCLI(t, e, "", "write", key, "--scope", level, "--body", body); err != nil {
		t.Fatalf("write %s %s: %v\n%s%s", level, key, err, out, errOut)
	}
}

// remove deletes key at level through the command line.
func remove(t *testing.T, e env, level, key string) {
	t.Helper()
	if out, errOut, err := runCLI(t, e, "", "rm", key, "--scope", level, "--type", "semantic"); err != nil {
		t.Fatalf("rm %s %s: %v\n%s%s", level, key, err, out, errOut)
	}
}

// wantBody checks that who, machine e, reads the level fact key as want
// ("": not at all).
func wantBody(t *testing.T, who string, e env, level, key, want string) {
	t.Helper()
	if got := body(t, e, level, key); got != want {
		t.Errorf("%s reads the %s fact %s as %q, want %q", who, level, key, got, want)
	}
}

// body reads key at level on e: its body, or "" when e has no such record.
func body(t *testing.T, e env, level, key string) string {
	t.Helper()
	out, errOut, err := runCLI(t, e, "", "show", key, "--scope", level, "--type", "semantic", "--json")
	if err != nil {
		if strings.Contains(errOut, "not_found") {
			return ""
		}
		t.Fatalf("show %s %s: %v\n%s", level, key, err, errOut)
	}
	var r struct{ Body string }
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r.Body
}

// recordCount counts e's records.
func recordCount(t *testing.T, e env) int {
	t.Helper()
	out, errOut, err := runCLI(t, e, "", "stats", "--json")
	if err != nil {
		t.Fatalf("stats: %v\n%s", err, errOut)
	}
	var s struct{ Records int }
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	return s.Records
}

// syncStatus is what memory-mcp sync status --json prints.
type syncStatus struct {
	URL       string
	LastSync  *time.Time `json:"last_sync"`
	Pending   int
	Cursor    int64
	Aside     []struct{ Key, Scope, Reason, Direction string } `json:"set_aside"`
	Conflicts []struct {
		ID            int64
		Key, Scope    string
		Winner, Loser team.Change
	}
}

func status(t *testing.T, e env) (syncStatus, string) {
	t.Helper()
	out, errOut, err := runCLI(t, e, "", "sync", "status", "--json")
	if err != nil {
		t.Fatalf("sync status: %v\n%s", err, errOut)
	}
	var s syncStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	return s, out
}

// pushRaw pushes changes straight to a server's endpoint with tok.
func pushRaw(t *testing.T, url, tok string, changes ...team.Change) []team.Result {
	t.Helper()
	b, _ := json.Marshal(team.PushRequest{Changes: changes})
	req, _ := http.NewRequest(http.MethodPost, url+team.PushPath, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push: %s", resp.Status)
	}
	var out team.PushResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Results
}

// fact is a put of a tenant fact, for pushRaw.
func fact(key, body string) team.Change {
	return team.Change{ID: team.NewID(), Scope: "tenant", Type: "semantic", Key: key, Op: team.OpPut,
		Record: &team.Version{Body: body}}
}

// seed pushes n tenant facts straight to the server, in batches.
func seed(t *testing.T, url, tok, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i += team.MaxPush {
		var cs []team.Change
		for j := i; j < min(n, i+team.MaxPush); j++ {
			cs = append(cs, fact(fmt.Sprintf("%s-%05d", prefix, j), fmt.Sprintf("fact number %d of the seed", j)))
		}
		for _, r := range pushRaw(t, url, tok, cs...) {
			if r.Status != team.Stored {
				t.Fatalf("seed: %+v", r)
			}
		}
	}
}

// pg reports whether the PostgreSQL tests can run, else skips t.
func pg(t *testing.T) {
	if os.Getenv(storetest.PostgresEnv) == "" {
		t.Skipf("%s is not set; eval \"$(.ci/postgres)\" to run the PostgreSQL tests", storetest.PostgresEnv)
	}
}

// onBoth runs fn on a team server on SQLite, and on two PostgreSQL
// replicas when a PostgreSQL server is at hand.
func onBoth(t *testing.T, fn func(t *testing.T, tm *syncTeam)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, newSyncTeam(t, false)) })
	t.Run("postgres", func(t *testing.T) {
		pg(t)
		fn(t, newSyncTeam(t, true))
	})
}
