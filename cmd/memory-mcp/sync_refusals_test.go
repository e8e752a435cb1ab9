package main

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory/team"
)

// A change holding a secret, pushed straight to the endpoint, is refused
// without the secret in the reason, stored nowhere (not in the database's
// bytes), and does not stop the change behind it.
func TestSyncSecretRefusedStoredNowhere(t *testing.T) {
	onBoth(t, testSecretRefused)
}

func testSecretRefused(t *testing.T, tm *syncTeam) {
	tok := tm.token("acme", "alice")
	secret := fakeAWSKey()
	bad := fact("aws-creds", "the deploy key is "+secret)
	badTag := fact("tagged", "a fine body")
	badTag.Record.Tags = []string{secret}
	good := fact("fine", "nothing secret here")
	res := pushRaw(t, tm.servers[0].url, tok, bad, badTag, good)
	for i, r := range res[:2] {
		if r.Status != team.Refused || !strings.Contains(r.Reason, "secret") || leaks(r.Reason, secret) {
			t.Errorf("change %d holding a secret: %+v", i, r)
		}
	}
	if res[2].Status != team.Stored || res[2].Seq == 0 {
		t.Errorf("the change behind the refused ones: %+v", res[2])
	}
	bob := tm.machine(tm.token("acme", "bob"))
	if n := syncOK(t, bob); n.Pulled != 1 || body(t, bob, "tenant", "fine") == "" {
		t.Errorf("bob pulled %+v", n)
	}
	if body(t, bob, "tenant", "aws-creds") != "" {
		t.Error("the secret's record reached bob")
	}
	if len(tm.servers) > 1 { // PostgreSQL: every row of every table, as pg_dump gives them
		if dump := pgDump(t, tm.srv); strings.Contains(dump, secret) {
			t.Error("the database holds the secret")
		}
		return
	}
	tm.servers[0].stop(t)
	files, _ := filepath.Glob(tm.srv.db + "*")
	if len(files) == 0 {
		t.Fatal("no database files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret", f)
		}
	}
}

// A token cannot push into another user's workspace or another tenant:
// such changes are refused, and the owners see nothing of them.
func TestSyncOtherUsersWorkspaceRefused(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		alice := tm.token("acme", "alice")
		url := tm.servers[0].url
		intoBob := fact("planted", "alice writes into bob's workspace")
		intoBob.Scope, intoBob.User = "workspace", "bob"
		intoGlobex := fact("planted-too", "alice writes into another tenant")
		intoGlobex.Tenant = "globex"
		system := fact("planted-system", "alice is not an admin")
		system.Scope = "system"
		project := fact("planted-project", "project memory is not shared")
		project.Scope = "project"
		res := pushRaw(t, url, alice, intoBob, intoGlobex, system, project)
		for i, r := range res {
			if r.Status != team.Refused || !strings.Contains(r.Reason, "unauthorised") && !strings.Contains(r.Reason, "scope") {
				t.Errorf("change %d: %+v", i, r)
			}
		}
		bob := tm.machine(tm.token("acme", "bob"))
		carol := tm.machine(tm.token("globex", "carol"))
		for name, m := range map[string]env{"bob": bob, "carol": carol} {
			if n := syncOK(t, m); n.Pulled != 0 {
				t.Errorf("%s pulled %d changes", name, n.Pulled)
			}
		}
		// Without a user, a workspace change is the token's own.
		own := fact("alices-own", "alice's own workspace")
		own.Scope = "workspace"
		if r := pushRaw(t, url, alice, own); r[0].Status != team.Stored {
			t.Fatalf("alice's own workspace: %+v", r[0])
		}
		if n := syncOK(t, bob); n.Pulled != 0 {
			t.Errorf("bob pulled %d of alice's workspace", n.Pulled)
		}
		alice2 := tm.machine(alice)
		syncOK(t, alice2)
		if body(t, alice2, "workspace", "alices-own") == "" {
			t.Error("alice's machine does not get her workspace fact")
		}
		// Malformed changes are refused one by one.
		res = pushRaw(t, url, alice, team.Change{ID: "bad id!", Scope: "tenant", Type: "semantic", Key: "k", Op: "put"},
			team.Change{ID: team.NewID(), Scope: "tenant", Type: "nonsense", Key: "k", Op: "put", Record: &team.Version{Body: "x"}},
			team.Change{ID: team.NewID(), Scope: "tenant", Type: "semantic", Key: "k", Op: "put"},
			fact("still-fine", "after three malformed changes"))
		for i, r := range res[:3] {
			if r.Status != team.Refused || !strings.Contains(r.Reason, "malformed") {
				t.Errorf("malformed change %d: %+v", i, r)
			}
		}
		if res[3].Status != team.Stored {
			t.Errorf("the change after the malformed ones: %+v", res[3])
		}
	})
}

// pgDump is the data of e's PostgreSQL database, dumped by pg_dump.
func pgDump(t *testing.T, e env) string {
	t.Helper()
	var dbURL string
	for _, kv := range e.extra {
		if v, ok := strings.CutPrefix(kv, "PROMETHEUS_MEMORY_DB_URL="); ok {
			dbURL = v
		}
	}
	bin, err := exec.LookPath("pg_dump")
	if err != nil {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
		if len(found) == 0 {
			t.Skip("no pg_dump to read the database with")
		}
		bin = found[len(found)-1]
	}
	out, err := exec.Command(bin, "--data-only", "--dbname", dbURL).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !strings.Contains(string(out), "nothing secret here") {
		t.Fatal("pg_dump's output lacks the change that was stored: it read another database")
	}
	return string(out)
}

// A change the server's log holds but this machine refuses (a secret
// stored before a rule for it existed, or a server that is not to be
// trusted) is set aside here with its reason, stored nowhere on the
// machine, and does not hold up the change after it, this round or the
// next.
func TestSyncPulledSecretSetAside(t *testing.T) {
	tm := newSyncTeam(t, false)
	const stand = "STANDIN-FOR-A-SECRET"
	secret := fakeAWSKey()
	res := pushRaw(t, tm.servers[0].url, tm.token("acme", "alice"),
		fact("old-rule", "the deploy key is "+stand), fact("after", "the change behind it"))
	if res[0].Status != team.Stored || res[1].Status != team.Stored {
		t.Fatalf("push: %+v", res)
	}
	tm.servers[0].stop(t)
	db, err := sql.Open("sqlite3", "file:"+tm.srv.db+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Exec(`UPDATE sync_log SET record = replace(record, ?1, ?2) WHERE instr(record, ?1) > 0`, stand, secret)
	if n, _ := r.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("planting the secret in the log: %d rows, %v", n, err)
	}
	db.Close()
	tm.restart(0)

	bob := tm.machine(tm.token("acme", "bob"))
	if n := syncOK(t, bob); n.Pulled != 1 {
		t.Errorf("bob pulled %+v, want the one change he may keep", n)
	}
	if body(t, bob, "tenant", "after") == "" || body(t, bob, "tenant", "old-rule") != "" {
		t.Error("bob's store: want the change behind the refused one, and not the refused one")
	}
	st, text := status(t, bob)
	if len(st.Aside) != 1 || st.Aside[0].Key != "old-rule" || !strings.Contains(st.Aside[0].Reason, "secret") {
		t.Errorf("set aside: %+v", st.Aside)
	}
	if strings.Contains(text, secret) {
		t.Errorf("sync status shows the secret:\n%s", text)
	}
	if n := syncOK(t, bob); n.Pulled != 0 {
		t.Errorf("the next round pulled %+v again", n)
	}
	files, _ := filepath.Glob(bob.db + "*")
	for _, f := range files {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret", f)
		}
	}
	// Once read, what was set aside is forgotten with sync clear, and
	// doctor no longer reports it.
	if out, errOut, err := runCLI(t, bob, "", "sync", "clear"); err != nil || !strings.Contains(out, "forgot 1 changes set aside") {
		t.Fatalf("sync clear: %v %q %s", err, out, errOut)
	}
	if st, _ := status(t, bob); len(st.Aside) != 0 {
		t.Errorf("set aside after clear: %+v", st.Aside)
	}
	if out, _, _ := runCLI(t, bob, "", "doctor"); !strings.Contains(out, " 0 set aside, 0 conflicts") || strings.Contains(out, "sync clear") {
		t.Errorf("doctor after clear:\n%s", out)
	}
}
