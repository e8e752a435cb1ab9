package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTeamServerForOneRepository serves one repository over HTTP: project
// facts are the repository's, shared by the team's tokens and mirrored to
// its markdown files both ways, and other tenants are refused. Without
// --root nothing is written into any workspace.
func TestTeamServerForOneRepository(t *testing.T) {
	e := newEnv(t)
	repo := filepath.Join(t.TempDir(), "repo")
	must(t, os.MkdirAll(repo, 0o755))
	ann := newToken(t, e, "--tenant", "acme", "--user", "ann")
	bob := newToken(t, e, "--tenant", "acme", "--user", "bob", "--profile", "ci")
	eve := newToken(t, e, "--tenant", "evil", "--user", "ann")

	// A root is served to one tenant, named; and it must be a directory.
	if out, err := e.command("serve", "--http", "127.0.0.1:0", "--root", repo).CombinedOutput(); err == nil || !strings.Contains(string(out), "--root needs --tenant") {
		t.Errorf("--root without --tenant: %v %s", err, out)
	}
	if out, err := e.command("serve", "--http", "127.0.0.1:0", "--root", filepath.Join(repo, "nope"), "--tenant", "acme").CombinedOutput(); err == nil || !strings.Contains(string(out), "is not a directory") {
		t.Errorf("--root missing: %v %s", err, out)
	}

	s := startTeamServer(t, e, "--root", repo, "--tenant", "acme", "--rate", "1000")
	as := connectTeam(t, s, ann)
	bs := connectTeam(t, s, bob)

	// A project fact written over HTTP is the repository's file.
	ok(t, as, "memory_write", map[string]any{"type": "semantic", "key": "deploy", "description": "How we deploy", "body": "Run make deploy."})
	file := filepath.Join(repo, ".prometheus", "memories", "deploy.md")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no markdown file for a fact written over HTTP: %v", err)
	}
	if !strings.Contains(string(b), `description: "How we deploy"`) || !strings.Contains(string(b), "Run make deploy.") {
		t.Errorf("deploy.md:\n%s", b)
	}
	// Every token of the team shares it, whatever its user and profile.
	if got := bodyOf(t, bs, "deploy"); got != "Run make deploy." {
		t.Errorf("bob reads deploy %q", got)
	}

	// A hand edit of the file is what the next read over HTTP returns.
	must(t, os.WriteFile(file, []byte(strings.Replace(string(b), "Run make deploy.", "Run ./ship.sh, edited by hand.", 1)), 0o644))
	if got := bodyOf(t, bs, "deploy"); got != "Run ./ship.sh, edited by hand." {
		t.Errorf("after a hand edit bob reads %q", got)
	}
	// A file added by hand (a pull request merged) is a record.
	must(t, os.WriteFile(filepath.Join(repo, ".prometheus", "memories", "review.md"), []byte("# Two approvals\n\nEvery change needs two approvals.\n"), 0o644))
	if got := bodyOf(t, as, "review"); !strings.Contains(got, "two approvals") {
		t.Errorf("a new file reads %q", got)
	}
	// Deleting over HTTP removes the file; removing a file deletes the record.
	ok(t, bs, "memory_delete", map[string]any{"key": "review"})
	if _, err := os.Stat(filepath.Join(repo, ".prometheus", "memories", "review.md")); !os.IsNotExist(err) {
		t.Errorf("review.md after the delete: %v", err)
	}
	must(t, os.Remove(file))
	if msg := fails(t, as, "memory_read", map[string]any{"key": "deploy"}); !strings.HasPrefix(msg, "not_found:") {
		t.Errorf("deploy after its file was removed: %s", msg)
	}

	// System memory stays the admins'.
	if msg := fails(t, as, "memory_write", map[string]any{"type": "semantic", "scope": "system", "key": "s", "body": "x"}); !strings.HasPrefix(msg, "invalid_argument:") {
		t.Errorf("non-admin system write: %s", msg)
	}

	// Another tenant's token is refused outright, its session never opens.
	if _, err := dialTeam(context.Background(), s, eve); err == nil {
		t.Error("a token of another tenant opened a session")
	}
	req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+eve)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "memory_") {
		t.Errorf("another tenant: %d %s", resp.StatusCode, body)
	}

	// An agent on stdio in the same checkout reads the same files.
	ok(t, as, "memory_write", map[string]any{"type": "procedural", "key": "release", "body": "tag, then push"})
	local := e
	local.root = repo
	if got := bodyOf(t, connect(t, local, nil), "release"); got != "tag, then push" {
		t.Errorf("a stdio server in the repository reads release %q", got)
	}
	s.stop(t)

	// Without --root, a team's project facts go to no file, wherever the
	// server runs (here with PROMETHEUS_WORKSPACE_ROOT set).
	plain := e.in(t, "plain")
	s2 := startTeamServer(t, plain, "--rate", "1000")
	ok(t, connectTeam(t, s2, ann), "memory_write", map[string]any{"type": "semantic", "key": "nowhere", "body": "kept in the database only"})
	if _, err := os.Stat(filepath.Join(plain.root, ".prometheus")); !os.IsNotExist(err) {
		t.Errorf("a server without --root wrote into its workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".prometheus", "memories", "nowhere.md")); !os.IsNotExist(err) {
		t.Errorf("a server without --root wrote into the repository: %v", err)
	}
	// Nor does the token's own memory show the repository's.
	if msg := fails(t, connectTeam(t, s2, ann), "memory_read", map[string]any{"key": "release"}); !strings.HasPrefix(msg, "not_found:") {
		t.Errorf("the repository's memory leaks into a profile's: %s", msg)
	}
	s2.stop(t)
}
