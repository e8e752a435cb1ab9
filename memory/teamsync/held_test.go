package teamsync

import (
	"bytes"
	"context"
	"fmt"
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
	log     *team.Log
	server  *memory.Store // the log's
	bob     *memory.Store
	bobFile string // bob's SQLite file, if bob is on SQLite
	sync    *Syncer
	admin   memory.Token
}

func newHeldTeam(t *testing.T, pg bool) *heldTeam {
	ctx := context.Background()
	dir := t.TempDir()
	server := storetest.Open(t, filepath.Join(dir, "server.db"), nil)
	log := team.New(server)
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
	target, file := filepath.Join(dir, "bob.db"), filepath.Join(dir, "bob.db")
	if pg {
		target, file = storetest.NewPostgres(t), ""
	}
	bob := storetest.Open(t, target, nil)
	return &heldTeam{log: log, server: server, bob: bob, bobFile: file, sync: New(bob, Config{URL: srv.URL, Token: "bob"}), admin: tokens["admin"]}
}

// round runs a whole round of bob's; pushOnly and pullOnly run half of
// one, so that a test can write between them.
func (tm *heldTeam) round(t *testing.T) {
	t.Helper()
	if _, err := tm.sync.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (tm *heldTeam) pushOnly(t *testing.T) {
	t.Helper()
	if _, err := tm.sync.push(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (tm *heldTeam) pullOnly(t *testing.T) {
	t.Helper()
	if _, _, err := tm.sync.pull(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// noneHeld fails if bob's machine still holds a change of the team's.
func (tm *heldTeam) noneHeld(t *testing.T) {
	t.Helper()
	var held int
	if err := tm.bob.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM sync_held`).Scan(&held); err != nil || held != 0 {
		t.Errorf("%d changes still held (%v)", held, err)
	}
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
	tm.round(t)
	if got := tm.bobHas(t, scope.System, "test-runner"); got != "use go test" {
		t.Fatalf("bob has %q after the first round", got)
	}

	// A round's push has gone when bob writes; its pull brings the
	// admin's newer version.
	tm.pushOnly(t)
	tm.bobPuts(t, scope.System, "test-runner", "use make test")
	tm.adminPuts(t, "test-runner", "use go test -race")
	tm.pullOnly(t)
	if got := tm.bobHas(t, scope.System, "test-runner"); got != "use make test" {
		t.Fatalf("bob's waiting change was replaced by the pull: %q", got)
	}

	// The next round: bob's change is refused, the admin's applied.
	tm.round(t)
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
	tm.noneHeld(t)
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
	tm.round(t)
	tm.pushOnly(t)
	tm.bobPuts(t, scope.Tenant, "release", "Release on Tuesdays (bob).")
	res, err := tm.log.Push(ctx, tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop",
		Scope: "tenant", Type: "semantic", Key: "release", Op: team.OpPut, Record: &team.Version{Body: "Release on Mondays."}}})
	if err != nil || res[0].Status != team.Stored {
		t.Fatalf("admin's push: %+v %v", res, err)
	}
	tm.pullOnly(t)
	for range 2 {
		tm.round(t)
		if got := tm.bobHas(t, scope.Tenant, "release"); got != "Release on Tuesdays (bob)." {
			t.Errorf("bob has %q, want his own version, stored after the other", got)
		}
	}
	tm.noneHeld(t)
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
		tm.round(t)
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
		tm.pullOnly(t)
		if got := tm.bobHas(t, scope.Tenant, "deploys"); got != "Deploys go out at noon (bob)." {
			t.Fatalf("the pull replaced bob's waiting change: %q", got)
		}
		tm.round(t)
		if got := tm.bobHas(t, scope.Tenant, "deploys"); got != "Deploys go out at two." {
			t.Errorf("bob has %q, want the team's later version", got)
		}
		tm.noneHeld(t)
	})
}

// plant swaps stand for secret in the server's log, as a server whose
// rules are older than this build's would have kept it.
func (tm *heldTeam) plant(t *testing.T, stand, secret string) {
	t.Helper()
	r, err := tm.server.DB().ExecContext(context.Background(), `UPDATE sync_log SET record = replace(record, $1, $2) WHERE record LIKE '%' || $1 || '%'`, stand, secret)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.RowsAffected(); n != 1 {
		t.Fatalf("planted the secret in %d rows of the log, want 1", n)
	}
}

// noSecret fails if bob's store holds secret anywhere: its tables of
// sync, and for SQLite every byte of its files.
func (tm *heldTeam) noSecret(t *testing.T, secret string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{`SELECT count(*) FROM sync_held WHERE change LIKE '%' || $1 || '%'`,
		`SELECT count(*) FROM sync_conflicts WHERE winner LIKE '%' || $1 || '%' OR loser LIKE '%' || $1 || '%'`,
		`SELECT count(*) FROM records WHERE body LIKE '%' || $1 || '%'`} {
		var n int
		if err := tm.bob.DB().QueryRowContext(ctx, q, secret).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows (%v)", q, n, err)
		}
	}
	if tm.bobFile == "" {
		return
	}
	files, _ := filepath.Glob(tm.bobFile + "*")
	for _, f := range files {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret", f)
		}
	}
}

// A change of the team's holding what this build takes for a secret,
// pulled while bob's change of the name waits, is set aside by its name,
// not held: the secret is stored nowhere on bob's machine.
func TestTeamSecretBehindAWaitingChangeIsNotHeld(t *testing.T) {
	onBoth(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		tm := newHeldTeam(t, pg)
		tm.round(t)
		tm.pushOnly(t)
		tm.bobPuts(t, scope.Tenant, "deploy-notes", "Deploys need the release key (bob).")
		const stand = "STANDIN-FOR-A-SECRET"
		res, err := tm.log.Push(ctx, tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop",
			Scope: "tenant", Type: "semantic", Key: "deploy-notes", Op: team.OpPut, Record: &team.Version{Body: "the key is " + stand}}})
		if err != nil || res[0].Status != team.Stored {
			t.Fatalf("admin's push: %+v %v", res, err)
		}
		secret := storetest.FakeAWSKey()
		tm.plant(t, stand, secret)
		tm.pullOnly(t)
		tm.round(t)
		if got := tm.bobHas(t, scope.Tenant, "deploy-notes"); got != "Deploys need the release key (bob)." {
			t.Errorf("bob has %q", got)
		}
		st, err := tm.sync.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Aside) != 1 || !strings.Contains(st.Aside[0].Reason, "secret") || strings.Contains(st.Aside[0].Reason, secret) {
			t.Errorf("set aside: %+v", st.Aside)
		}
		tm.noSecret(t, secret)
	})
}

// A change that replaced a version of bob's which, in the server's log,
// holds what this build takes for a secret: the version it replaced is
// set aside by its name, not kept as a conflict with the secret in it.
func TestTeamSecretInAReplacedVersionIsNotKept(t *testing.T) {
	onBoth(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		tm := newHeldTeam(t, pg)
		const stand = "STANDIN-FOR-A-SECRET"
		tm.bobPuts(t, scope.Tenant, "rotation", "Rotate the keys monthly, "+stand+" (bob).")
		tm.round(t)
		secret := storetest.FakeAWSKey()
		tm.plant(t, stand, secret)
		// Made without seeing bob's version: it replaces it.
		res, err := tm.log.Push(ctx, tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop",
			Scope: "tenant", Type: "semantic", Key: "rotation", Op: team.OpPut, Record: &team.Version{Body: "Rotate the keys weekly."}}})
		if err != nil || res[0].Status != team.Stored {
			t.Fatalf("admin's push: %+v %v", res, err)
		}
		tm.round(t)
		if got := tm.bobHas(t, scope.Tenant, "rotation"); got != "Rotate the keys weekly." {
			t.Errorf("bob has %q, want the later version", got)
		}
		st, err := tm.sync.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Aside) != 1 || !strings.Contains(st.Aside[0].Reason, "replaced") || !strings.Contains(st.Aside[0].Reason, "secret") {
			t.Errorf("set aside: %+v", st.Aside)
		}
		tm.noSecret(t, secret)
	})
}

func (tm *heldTeam) adminTenantPut(t *testing.T, key, body string, base int64) {
	t.Helper()
	res, err := tm.log.Push(context.Background(), tm.admin, []team.Change{{ID: team.NewID(), Machine: "admins-laptop", Base: base,
		Scope: "tenant", Type: "semantic", Key: key, Op: team.OpPut, Record: &team.Version{Body: body}}})
	if err != nil || res[0].Status != team.Stored {
		t.Fatalf("admin's push: %+v %v", res, err)
	}
}

// A held change that replaced a version of bob's is one conflict: noted
// when pulled, not again when it is released.
func TestTeamChangeHeldLosesOneConflictOnce(t *testing.T) {
	onBoth(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		tm := newHeldTeam(t, pg)
		tm.bobPuts(t, scope.Tenant, "k", "bob v1")
		tm.round(t)
		tm.adminTenantPut(t, "k", "admin, not having seen bob's", 0)
		tm.pushOnly(t)
		tm.bobPuts(t, scope.Tenant, "k", "bob v2")
		tm.pullOnly(t)
		tm.round(t)
		st, err := tm.sync.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Conflicts) != 1 {
			for _, c := range st.Conflicts {
				t.Logf("conflict #%d seq winner %q loser %q", c.ID, c.Winner.Record.Body, c.Loser.Record.Body)
			}
			t.Errorf("%d conflicts for one lost version, want 1", len(st.Conflicts))
		}
	})
}

// bob writes a name, a teammate's change of it is held behind his, then
// bob deletes it before it is ever sent: the waiting change is dropped
// (a delete of a name the team never had, as far as bob knew), and the
// held change is applied, so bob ends with the team's version.
func TestTeamChangeHeldBehindADroppedDeleteIsApplied(t *testing.T) {
	onBoth(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		tm := newHeldTeam(t, pg)
		tm.round(t)
		tm.pushOnly(t)
		tm.bobPuts(t, scope.Tenant, "x", "bob's draft")
		tm.adminTenantPut(t, "x", "the team's x", 0)
		tm.pullOnly(t)
		lv := scope.Tenant
		if _, err := tm.bob.Delete(ctx, memory.Project{}, memory.Selector{Key: "x", Type: memory.Semantic, Scope: &lv}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			tm.round(t)
		}
		tm.noneHeld(t)
		r, err := tm.bob.Get(ctx, memory.Project{}.ID, memory.Selector{Key: "x", Type: memory.Semantic, Scope: &lv})
		if err != nil {
			t.Errorf("bob lacks the team's x: %v", err)
		} else if r.Body != "the team's x" {
			t.Errorf("bob has %q", r.Body)
		}
	})
}

// A pulled change whose key itself is shaped like a secret is set aside
// without the key: neither sync status nor the database holds it.
func TestTeamSecretShapedKeyIsWithheld(t *testing.T) {
	onBoth(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		tm := newHeldTeam(t, pg)
		tm.adminTenantPut(t, "standin-key", "a body", 0)
		secret := "sk-" + strings.Repeat("3f9a0c7e", 4)
		if memory.ScanField("key", secret) == nil {
			t.Fatal("the stand-in is not shaped like a secret")
		}
		if _, err := tm.server.DB().ExecContext(ctx, `UPDATE sync_log SET key = $1 WHERE key = 'standin-key'`, secret); err != nil {
			t.Fatal(err)
		}
		tm.round(t)
		st, err := tm.sync.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Aside) != 1 || !strings.Contains(st.Aside[0].Reason, "secret") || strings.Contains(fmt.Sprint(st), "3f9a0c7e") {
			t.Errorf("set aside: %+v", st.Aside)
		}
		tm.noSecret(t, secret)
	})
}
