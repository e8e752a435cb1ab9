package main

import (
	"strings"
	"testing"
)

// Updates and deletes travel; a delete stays deleted, for machines that
// had the record and for one that joins later.
func TestSyncUpdatesAndDeletes(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		alice := tm.machine(tm.token("acme", "alice"))
		bob := tm.machine(tm.token("acme", "bob"))
		put(t, alice, "tenant", "ci", "CI runs on push.")
		put(t, alice, "tenant", "keep", "This one stays.")
		syncOK(t, alice)
		syncOK(t, bob)
		put(t, alice, "tenant", "ci", "CI runs on every pull request.")
		syncOK(t, alice)
		syncOK(t, bob)
		if got := body(t, bob, "tenant", "ci"); got != "CI runs on every pull request." {
			t.Fatalf("bob reads the updated fact as %q", got)
		}
		remove(t, alice, "tenant", "ci")
		syncOK(t, alice)
		if n := syncOK(t, bob); n.Pulled != 1 {
			t.Errorf("bob pulled %d changes, want the delete", n.Pulled)
		}
		wantBody(t, "bob", bob, "tenant", "ci", "")
		for range 2 {
			syncOK(t, alice)
			syncOK(t, bob)
		}
		later := tm.machine(tm.token("acme", "dave"))
		syncOK(t, later)
		for name, m := range map[string]env{"alice": alice, "bob": bob, "a later machine": later} {
			wantBody(t, name, m, "tenant", "ci", "")
			wantBody(t, name, m, "tenant", "keep", "This one stays.")
		}
		// The delete is not sent again by anyone.
		if n := syncOK(t, bob); n.Pushed != 0 || n.Pulled != 0 {
			t.Errorf("an idle round moved %+v", n)
		}
	})
}

// Two machines change the same fact offline: the change the server
// accepts later wins on every machine, and the machine whose version lost
// keeps it, with both bodies, and can restore it. A delete and an edit
// conflict the same way, and an edit ordered before a delete never brings
// the record back.
func TestSyncConflictsConverge(t *testing.T) {
	onBoth(t, func(t *testing.T, tm *syncTeam) {
		alice := tm.machine(tm.token("acme", "alice"))
		bob := tm.machine(tm.token("acme", "bob"))
		put(t, alice, "tenant", "release", "Release on Fridays.")
		syncOK(t, alice)
		syncOK(t, bob)

		// Offline, both edit.
		put(t, alice, "tenant", "release", "Release on Mondays (alice).")
		put(t, bob, "tenant", "release", "Release on Tuesdays (bob).")
		syncOK(t, alice) // accepted first
		if n := syncOK(t, bob); n.Conflicts != 0 {
			t.Errorf("bob, whose change wins, counts %d conflicts", n.Conflicts)
		}
		if n := syncOK(t, alice); n.Conflicts != 1 {
			t.Errorf("alice, whose change lost, counts %d conflicts", n.Conflicts)
		}
		for name, m := range map[string]env{"alice": alice, "bob": bob} {
			wantBody(t, name, m, "tenant", "release", "Release on Tuesdays (bob).")
		}
		st, text := status(t, alice)
		if len(st.Conflicts) != 1 {
			t.Fatalf("alice's conflicts: %s", text)
		}
		c := st.Conflicts[0]
		if c.Key != "release" || c.Scope != "tenant" || c.Loser.Record == nil || c.Loser.Record.Body != "Release on Mondays (alice)." ||
			c.Winner.Record == nil || c.Winner.Record.Body != "Release on Tuesdays (bob)." {
			t.Errorf("alice's conflict: %s", text)
		}
		if st, _ := status(t, bob); len(st.Conflicts) != 0 {
			t.Errorf("bob keeps a conflict he won: %+v", st.Conflicts)
		}
		human, _, _ := runCLI(t, alice, "", "sync", "status")
		for _, want := range []string{"Release on Mondays (alice).", "Release on Tuesdays (bob).", "tenant/semantic/release"} {
			if !strings.Contains(human, want) {
				t.Errorf("sync status does not show %q:\n%s", want, human)
			}
		}

		// Alice restores her version: it wins in its turn, everywhere.
		if _, errOut, err := runCLI(t, alice, "", "sync", "restore", "1"); err != nil {
			t.Fatalf("restore: %v %s", err, errOut)
		}
		syncOK(t, alice)
		syncOK(t, bob)
		wantBody(t, "bob", bob, "tenant", "release", "Release on Mondays (alice).")
		if st, _ := status(t, alice); len(st.Conflicts) != 0 {
			t.Errorf("the restored conflict is still listed: %+v", st.Conflicts)
		}

		// An edit and a delete made offline: the edit is accepted first,
		// the delete after it wins, and the edit is kept on bob's side.
		put(t, bob, "tenant", "release", "Release whenever (bob).")
		remove(t, alice, "tenant", "release")
		syncOK(t, bob)
		syncOK(t, alice)
		syncOK(t, bob)
		later := tm.machine(tm.token("acme", "erin"))
		syncOK(t, later)
		for name, m := range map[string]env{"alice": alice, "bob": bob, "a later machine": later} {
			wantBody(t, name, m, "tenant", "release", "")
		}
		st, text = status(t, bob)
		if len(st.Conflicts) != 1 || st.Conflicts[0].Loser.Record == nil || st.Conflicts[0].Loser.Record.Body != "Release whenever (bob)." ||
			st.Conflicts[0].Winner.Op != "delete" {
			t.Errorf("bob's conflict with the delete: %s", text)
		}
	})
}
