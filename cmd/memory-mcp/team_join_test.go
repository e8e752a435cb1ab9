package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// team join stores the URL and the token 0600 and never prints the token;
// a token file others may read is refused rather than used; a bad token
// leaves the file as it was; the environment wins over the file; team
// leave ends it.
func TestTeamJoinAndLeave(t *testing.T) {
	tm := newSyncTeam(t, false)
	tok := tm.token("acme", "alice")
	url := tm.servers[0].url
	e := newEnv(t)
	file := filepath.Join(e.home, ".prometheus", "team.json")

	out, errOut, err := runCLI(t, e, tok+"\n", "team", "join", url)
	if err != nil {
		t.Fatalf("team join: %v\n%s", err, errOut)
	}
	if strings.Contains(out+errOut, tok) {
		t.Errorf("team join printed the token:\n%s%s", out, errOut)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("team.json: %v, %v", fi, err)
	}
	put(t, e, "tenant", "joined", "Written on a machine that joined with team join.")
	if n := syncOK(t, e); n.Pushed != 1 {
		t.Errorf("first round after join pushed %+v", n)
	}

	if _, _, err := runCLI(t, e, "not-a-token\n", "team", "join", url); err == nil {
		t.Error("team join took a token that is not a mem_ token")
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), tok) {
		t.Error("a refused join changed the stored token")
	}

	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	line := syncFails(t, e)
	if !strings.Contains(line, "chmod 600") || strings.Contains(line, tok) {
		t.Errorf("sync with a token file others may read says %q", line)
	}
	os.Chmod(file, 0o600)

	other := e
	other.extra = []string{"PROMETHEUS_MEMORY_TEAM_URL=http://127.0.0.1:1", "PROMETHEUS_MEMORY_TEAM_TOKEN=" + tok}
	if line := syncFails(t, other); !strings.Contains(line, "127.0.0.1:1") {
		t.Errorf("the environment did not win over the file: %q", line)
	}

	if _, errOut, err := runCLI(t, e, "", "team", "leave"); err != nil {
		t.Fatalf("team leave: %v\n%s", err, errOut)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("team.json after leave: %v", err)
	}
	if line := syncFails(t, e); !strings.Contains(line, "no team joined") {
		t.Errorf("sync after leave says %q", line)
	}
}
