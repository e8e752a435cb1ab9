package teamsync

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/memory/team"
	"prom.codes/memory-mcp/scope"
)

// heldTeam is a team server on loopback (memory/team over a real SQLite
// file) whose tokens are "admin", an admin of acme, and "bob", a user of
// acme; and bob's machine, a store of its own syncing with it: a SQLite
// file, or a PostgreSQL database of its own when pg.
type heldTeam struct {
	log   *team.Log
	bob   *memory.Store
	sync  *Syncer
	admin memory.Token
}

func newHeldTeam(t *testing.T, pg bool) *heldTeam {
	ctx := context.Background()
	dir := t.TempDir()
	log := team.New(storetest.Open(t, filepath.Join(dir, "server.db"), nil))
	if err := log.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]memory.Token{
		"admin": {Tenant: "acme", User: "root", Profile: "default", Admin: true},
		"bob":   {Tenant: "acme", User: "bob", Profile: "default"},
	}
	srv := httptest.NewServer(team.Handler(log, func(r *http.Request) (memory.Token, bool) {
		tok, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		return tok, ok
	}, slog.New(slog.DiscardHandler), func(err error) error { return err }))
	t.Cleanup(srv.Close)
	target := filepath.Join(dir, "bob.db")
	if pg {
		target = storetest.NewPostgres(t)
	}
	bob := storetest.Open(t, target, nil)
	return &heldTeam{log: log, bob: bob, sync: New(bob, Config{URL: srv.URL, Token: "bob"}), admin: tokens["admin"]}
}

// adminPuts stores a system fact on the server, as the admin's machine
// would push it.
// onBoth runs fn with bob's machine on SQLite, then on PostgreSQL when
// the tests have one.
func onBoth(t *testing.T, fn func(t *testing.T, pg bool)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, false) })
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(storetest.PostgresEnv) == "" {
			t.Skipf("%s is not set", storetest.PostgresEnv)
		}
		fn(t, true)
	})
}

func (tm *heldTeam) adminPuts(t *testing.T, key, body string) {
	t.Helper()
	res, err := tm.log.Push(context.Background(), tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop",
		Scope: "system", Type: "semantic", Key: key, Op: team.OpPut, Record: &team.Version{Body: body}}})
	if err != nil || res[0].Status != team.Stored {
		t.Fatalf("admin's push: %+v %v", res, err)
	}
}

func (tm *heldTeam) bobPuts(t *testing.T, lv scope.Level, key, body string) {
	t.Helper()
	if _, _, err := tm.bob.Put(context.Background(), memory.Project{}, memory.Write{Scope: lv, Type: memory.Semantic, Key: key, Body: body}); err != nil {
		t.Fatal(err)
	}
}

func (tm *heldTeam) bobHas(t *testing.T, lv scope.Level, key string) string {
	t.Helper()
	r, err := tm.bob.Get(context.Background(), memory.Project{}.ID, memory.Selector{Key: key, Type: memory.Semantic, Scope: &lv})
	if err != nil {
		t.Fatalf("bob's %s: %v", key, err)
	}
	return r.Body
}

// A change of the team's pulled while bob's own change to the same name
// waits is held back, since the server orders bob's after it. When the
// server refuses bob's change (he is no admin), the team's version is
// applied after all, and bob's is kept as a conflict it lost: neither is
// lost.
func TestTeamChangeHeldBehindARefusedOneIsApplied(t *testing.T) {
	onBoth(t, testHeldBehindRefused)
}

func testHeldBehindRefused(t *testing.T, pg bool) {
	ctx := context.Background()
	tm := newHeldTeam(t, pg)
	tm.adminPuts(t, "test-runner", "use go test")
	if _, err := tm.sync.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tm.bobHas(t, scope.System, "test-runner"); got != "use go test" {
		t.Fatalf("bob has %q after the first round", got)
	}

	// A round's push has gone when bob writes; its pull brings the
	// admin's newer version.
	if _, err := tm.sync.push(ctx); err != nil {
		t.Fatal(err)
	}
	tm.bobPuts(t, scope.System, "test-runner", "use make test")
	tm.adminPuts(t, "test-runner", "use go test -race")
	if _, _, err := tm.sync.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tm.bobHas(t, scope.System, "test-runner"); got != "use make test" {
		t.Fatalf("bob's waiting change was replaced by the pull: %q", got)
	}

	// The next round: bob's change is refused, the admin's applied.
	if _, err := tm.sync.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tm.bobHas(t, scope.System, "test-runner"); got != "use go test -race" {
		t.Errorf("after the refusal bob has %q, want the team's version", got)
	}
	st, err := tm.sync.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Aside) != 1 || st.Aside[0].Key != "test-runner" || !strings.Contains(st.Aside[0].Reason, "admin") {
		t.Errorf("set aside: %+v", st.Aside)
	}
	if len(st.Conflicts) != 1 || st.Conflicts[0].Loser.Record == nil || st.Conflicts[0].Loser.Record.Body != "use make test" ||
		st.Conflicts[0].Winner.Record == nil || st.Conflicts[0].Winner.Record.Body != "use go test -race" {
		t.Errorf("conflicts: %+v", st.Conflicts)
	}
	if st.Pending != 0 {
		t.Errorf("%d changes still wait", st.Pending)
	}
	var held int
	if err := tm.bob.DB().QueryRowContext(ctx, `SELECT count(*) FROM sync_held`).Scan(&held); err != nil || held != 0 {
		t.Errorf("%d changes still held (%v)", held, err)
	}
}

// When the server stores the waiting change instead, it wins: the team's
// change held behind it is dropped, never applied over it, and a later
// round changes nothing.
func TestTeamChangeHeldBehindAStoredOneIsDropped(t *testing.T) {
	onBoth(t, testHeldBehindStored)
}

func testHeldBehindStored(t *testing.T, pg bool) {
	ctx := context.Background()
	tm := newHeldTeam(t, pg)
	if _, err := tm.sync.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.sync.push(ctx); err != nil {
		t.Fatal(err)
	}
	tm.bobPuts(t, scope.Tenant, "release", "Release on Tuesdays (bob).")
	res, err := tm.log.Push(ctx, tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop",
		Scope: "tenant", Type: "semantic", Key: "release", Op: team.OpPut, Record: &team.Version{Body: "Release on Mondays."}}})
	if err != nil || res[0].Status != team.Stored {
		t.Fatalf("admin's push: %+v %v", res, err)
	}
	if _, _, err := tm.sync.pull(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tm.sync.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if got := tm.bobHas(t, scope.Tenant, "release"); got != "Release on Tuesdays (bob)." {
			t.Errorf("bob has %q, want his own version, stored after the other", got)
		}
	}
	var held int
	if err := tm.bob.DB().QueryRowContext(ctx, `SELECT count(*) FROM sync_held`).Scan(&held); err != nil || held != 0 {
		t.Errorf("%d changes still held (%v)", held, err)
	}
	page, err := tm.log.Pull(ctx, tm.admin, 0, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Changes); n == 0 || page.Changes[n-1].Record == nil || page.Changes[n-1].Record.Body != "Release on Tuesdays (bob)." {
		t.Errorf("the team's latest is not bob's: %+v", page.Changes)
	}
}

// A push whose answer was lost leaves bob's change waiting, though the
// server stored it; a teammate's change to the same name, stored after
// it, is held back by the pull. When the push again is answered with the
// earlier seq, the held change is the later one on the server, and bob
// applies it: he ends where the team is.
func TestTeamChangeHeldBehindALostAnswerIsApplied(t *testing.T) {
	onBoth(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		tm := newHeldTeam(t, pg)
		if _, err := tm.sync.Round(ctx); err != nil {
			t.Fatal(err)
		}
		tm.bobPuts(t, scope.Tenant, "deploys", "Deploys go out at noon (bob).")
		if n, err := tm.sync.push(ctx); err != nil || n != 1 {
			t.Fatalf("push: %d, %v", n, err)
		}
		// The answer never came: as far as bob's machine knows, the
		// change still waits and the name has no version of the team's.
		for _, q := range []string{`UPDATE sync_outbox SET seq = NULL`, `DELETE FROM sync_names`} {
			if _, err := tm.bob.DB().ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		res, err := tm.log.Push(ctx, tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop", Base: 1,
			Scope: "tenant", Type: "semantic", Key: "deploys", Op: team.OpPut, Record: &team.Version{Body: "Deploys go out at two."}}})
		if err != nil || res[0].Status != team.Stored {
			t.Fatalf("admin's push: %+v %v", res, err)
		}
		if _, _, err := tm.sync.pull(ctx); err != nil {
			t.Fatal(err)
		}
		if got := tm.bobHas(t, scope.Tenant, "deploys"); got != "Deploys go out at noon (bob)." {
			t.Fatalf("the pull replaced bob's waiting change: %q", got)
		}
		if _, err := tm.sync.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if got := tm.bobHas(t, scope.Tenant, "deploys"); got != "Deploys go out at two." {
			t.Errorf("bob has %q, want the team's later version", got)
		}
		var held int
		if err := tm.bob.DB().QueryRowContext(ctx, `SELECT count(*) FROM sync_held`).Scan(&held); err != nil || held != 0 {
			t.Errorf("%d changes still held (%v)", held, err)
		}
	})
}
