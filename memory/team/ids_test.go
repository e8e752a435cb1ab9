package team_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/storetest"
	"prom.codes/memory-mcp/memory/team"
)

// The ids a change carries are the client's to choose, and the log hands
// them to every teammate who pulls: one shaped like a secret is refused
// like a secret in the record, and nothing of it is stored.
func TestSecretShapedIDsRefused(t *testing.T) {
	const pat = "ghp_Zk3q9XbT2mV7nR4wY8pL1sD6fH0jC5aE9uQ2"
	both(t, func(t *testing.T, a, _ *team.Log) {
		byID := put("by-id", "fine", 0)
		byID.ID = pat
		byMachine := put("by-machine", "fine", 0)
		byMachine.Machine = "laptop-" + pat
		after := put("after", "the change behind them", 0)
		res, err := a.Push(ctx, alice, []team.Change{byID, byMachine, after})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res[:2] {
			if r.Status != team.Refused || !strings.Contains(r.Reason, "secret") {
				t.Errorf("change %d: %+v, want refused as a secret", i, r)
			}
		}
		if res[2].Status != team.Stored {
			t.Errorf("the change behind them: %+v", res[2])
		}
		page, err := a.Pull(ctx, alice, 0, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Changes {
			if strings.Contains(c.ID+c.Machine, "ghp_") {
				t.Errorf("pulled a secret-shaped id: %+v", c)
			}
		}
		if len(page.Changes) != 1 {
			t.Errorf("pulled %d changes, want 1", len(page.Changes))
		}
	})
}

// A change that leaves out confidence, as a client of the wire may, gets
// the default a write through the tools gets, not zero.
func TestPushWithoutConfidence(t *testing.T) {
	both(t, func(t *testing.T, a, _ *team.Log) {
		res, err := a.Push(ctx, alice, []team.Change{put("plain", "no confidence given", 0)})
		if err != nil || res[0].Status != team.Stored {
			t.Fatal(res, err)
		}
		page, err := a.Pull(ctx, alice, 0, "", 10)
		if err != nil || len(page.Changes) != 1 {
			t.Fatal(page, err)
		}
		if c := page.Changes[0].Record.Confidence; c == nil || *c != 0.5 {
			t.Errorf("confidence %v, want 0.5", c)
		}
	})
}

// A machine id is its first pusher's: a teammate pushing under it (so
// that its owner would take the change for its own and never apply it)
// is refused, and the owner's changes under it go on.
func TestMachineIDOfAnotherUserRefused(t *testing.T) {
	both(t, func(t *testing.T, a, b *team.Log) {
		bob := memory.Token{Tenant: "acme", User: "bob", Profile: "default"}
		mine := put("k", "alice's", 0)
		if rs, err := a.Push(ctx, alice, []team.Change{mine}); err != nil || rs[0].Status != team.Stored {
			t.Fatalf("alice: %+v %v", rs, err)
		}
		posing := put("k", "bob's, posing as alice's machine", 0)
		rs, err := b.Push(ctx, bob, []team.Change{posing})
		if err != nil || rs[0].Status != team.Refused || !strings.Contains(rs[0].Reason, "machine") {
			t.Fatalf("bob under alice's machine id: %+v %v; want refused", rs, err)
		}
		again := put("k2", "alice's again", 0)
		if rs, err := b.Push(ctx, alice, []team.Change{again}); err != nil || rs[0].Status != team.Stored {
			t.Fatalf("alice again: %+v %v", rs, err)
		}
		page, err := a.Pull(ctx, bob, 0, "", 10)
		if err != nil || len(page.Changes) != 2 {
			t.Fatalf("pulled %+v %v; want alice's two changes", page.Changes, err)
		}
	})
}

// A push or pull the database fails is answered 503, and the error goes
// to the log only through redact: it may carry the database's password.
func TestDatabaseErrorsLoggedRedacted(t *testing.T) {
	var logged bytes.Buffer
	st := storetest.Open(t, filepath.Join(t.TempDir(), "memory.db"), nil)
	l := team.New(st)
	if err := l.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	h := team.Handler(l, func(*http.Request) (memory.Token, bool) { return alice, true },
		slog.New(slog.NewTextHandler(&logged, nil)), func(error) error { return errors.New("(redacted)") })
	st.Close()
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodPost, team.PushPath, strings.NewReader(`{"changes": [{"id": "c1", "machine": "m1", "scope": "tenant", "type": "semantic", "key": "k", "op": "put", "record": {"body": "b"}}]}`)),
		httptest.NewRequest(http.MethodGet, team.PullPath+"?after=0", nil),
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("%s %s on a closed database: %d %s", r.Method, r.URL, w.Code, w.Body)
		}
	}
	if got := logged.String(); strings.Count(got, "(redacted)") != 2 || strings.Contains(got, "closed") {
		t.Errorf("log:\n%s", got)
	}
}
