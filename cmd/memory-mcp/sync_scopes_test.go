package main

import (
	"strings"
	"testing"
)

// Tenant facts reach every teammate and no other tenant; workspace facts
// follow their user to each of the user's machines and nobody else's;
// project facts never leave the machine.
func TestSyncScopes(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		alice1 := tm.machine(tm.token("acme", "alice"))
		alice2 := tm.machine(tm.token("acme", "alice"))
		bob := tm.machine(tm.token("acme", "bob"))
		carol := tm.machine(tm.token("globex", "carol"))

		put(t, alice1, "tenant", "deploy-day", "We deploy on Tuesdays.")
		put(t, alice1, "workspace", "editor", "Alice edits with vim.")
		put(t, alice1, "project", "local-only", "Only this checkout knows this.")
		if n := syncOK(t, alice1); n.Pushed != 2 {
			t.Errorf("alice's first machine pushed %d changes, want 2 (tenant and workspace; project stays)", n.Pushed)
		}
		for _, m := range []env{alice2, bob, carol} {
			syncOK(t, m)
		}
		wantBody(t, "bob", bob, "tenant", "deploy-day", "We deploy on Tuesdays.")
		wantBody(t, "alice's second machine", alice2, "tenant", "deploy-day", "We deploy on Tuesdays.")
		wantBody(t, "carol", carol, "tenant", "deploy-day", "")
		wantBody(t, "alice's second machine", alice2, "workspace", "editor", "Alice edits with vim.")
		for name, m := range map[string]env{"bob": bob, "carol": carol} {
			wantBody(t, name, m, "workspace", "editor", "")
		}
		for name, m := range map[string]env{"alice2": alice2, "bob": bob, "carol": carol} {
			wantBody(t, name, m, "project", "local-only", "")
		}
		if n := recordCount(t, carol); n != 0 {
			t.Errorf("carol of another tenant holds %d records", n)
		}
		// The server holds the shared facts, never the project one.
		out, _, err := runCLI(t, tm.srv, "", "export", "--all-projects")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "deploy-day") || strings.Contains(out, "local-only") {
			t.Errorf("the server's records:\n%s", out)
		}
		// A teammate's change travels back, and what a machine pulled is not
		// pushed again.
		if n := syncOK(t, bob); n.Pushed != 0 {
			t.Errorf("bob pushed %d changes he only pulled", n.Pushed)
		}
	})
}

// An admin's system fact reaches every tenant; a system fact written on a
// machine without an admin token is set aside with its reason and changes
// nothing on the server.
func TestSyncAdminSystemFact(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		admin := tm.machine(tm.token("acme", "root", "--admin"))
		bob := tm.machine(tm.token("acme", "bob"))
		carol := tm.machine(tm.token("globex", "carol"))
		put(t, admin, "system", "test-runner", "use go test")
		syncOK(t, admin)
		for name, m := range map[string]env{"bob": bob, "carol": carol} {
			syncOK(t, m)
			wantBody(t, name, m, "system", "test-runner", "use go test")
		}
		// Narrowest wins on the merged records.
		put(t, bob, "tenant", "test-runner", "use make test")
		out, _, err := runCLI(t, bob, "", "show", "test-runner", "--type", "semantic")
		if err != nil || !strings.Contains(out, "make test") {
			t.Errorf("bob's narrower tenant fact does not win: %v\n%s", err, out)
		}

		put(t, bob, "system", "bobs-rule", "bob is not an admin")
		if n := syncOK(t, bob); n.Pushed != 1 {
			t.Errorf("bob's round pushed %d, want the tenant fact alone", n.Pushed)
		}
		st, _ := status(t, bob)
		if len(st.Aside) != 1 || st.Aside[0].Key != "bobs-rule" || !strings.Contains(st.Aside[0].Reason, "admin") {
			t.Errorf("set aside: %+v", st.Aside)
		}
		if st.Pending != 0 {
			t.Errorf("pending %d after the refused change was set aside", st.Pending)
		}
		syncOK(t, carol)
		wantBody(t, "carol", carol, "system", "bobs-rule", "")
	})
}

// What an MCP client writes on the team server over HTTP reaches the
// machines, and what a machine pushes is there for MCP clients.
func TestSyncWithHTTPClients(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		tok := tm.token("acme", "alice")
		cs := connectTeam(t, tm.servers[len(tm.servers)-1], tok)
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "from-http", "scope": "tenant", "body": "Written over HTTP."})
		ok(t, cs, "memory_write", map[string]any{"type": "semantic", "key": "mine-http", "scope": "workspace", "body": "Alice's, over HTTP."})
		bob := tm.machine(tm.token("acme", "bob"))
		alice := tm.machine(tok)
		syncOK(t, bob)
		syncOK(t, alice)
		wantBody(t, "bob", bob, "tenant", "from-http", "Written over HTTP.")
		wantBody(t, "bob", bob, "workspace", "mine-http", "")
		wantBody(t, "alice's machine", alice, "workspace", "mine-http", "Alice's, over HTTP.")
		put(t, bob, "tenant", "from-machine", "Pushed by bob's machine.")
		syncOK(t, bob)
		if got := bodyOf(t, cs, "from-machine"); got != "Pushed by bob's machine." {
			t.Errorf("the HTTP client reads %q", got)
		}
		ok(t, cs, "memory_delete", map[string]any{"key": "from-http", "type": "semantic", "scope": "tenant"})
		syncOK(t, bob)
		wantBody(t, "bob", bob, "tenant", "from-http", "")
	})
}
