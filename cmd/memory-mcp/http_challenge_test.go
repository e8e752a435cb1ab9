package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnauthorizedChallenge: a 401 says error="invalid_token" when the
// request bore a token that is no live one (wrong, cut short, revoked), so
// a client asks for another token instead of starting a sign-in; a
// request that bore none gets the bare challenge (RFC 6750 §3, §3.1).
func TestUnauthorizedChallenge(t *testing.T) {
	e := newEnv(t)
	live := newToken(t, e, "--tenant", "acme", "--user", "ann")
	revoked := newToken(t, e, "--tenant", "acme", "--user", "ann", "--profile", "ci")
	if out, err := e.command("token", "revoke", revoked).Output(); err != nil || !strings.HasPrefix(string(out), "revoked tok_") {
		t.Fatalf("revoke: %q %v", out, err)
	}
	s := startTeamServer(t, e)
	const bare, invalid = `Bearer realm="memory-mcp"`, `Bearer realm="memory-mcp", error="invalid_token"`
	for _, c := range []struct{ auth, want string }{
		{"", bare},
		{"Basic " + live, bare},
		{"Bearer", bare},
		{"Bearer mem_" + strings.Repeat("0", 64), invalid},
		{"Bearer " + live[:20], invalid},
		{"bearer " + revoked, invalid},
	} {
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || len(got) != 1 || got[0] != c.want {
			t.Errorf("Authorization %.12q: %d, WWW-Authenticate %q; want 401, %q", c.auth, resp.StatusCode, got, c.want)
		}
	}
	// A live token passes.
	cs := connectTeam(t, s, live)
	ok(t, cs, "memory_list", map[string]any{})
}
