package teamsync

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

const testToken = "mem_0123456789abcdef0123456789abcdef"

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// One server is one team however its URL is written: joined with a
// trailing slash and named without one in the environment (or the other
// way round), the configurations are the same, so no round starts afresh.
func TestOneServerOneURL(t *testing.T) {
	home := t.TempDir()
	if err := Join(home, " https://team.example:8443/memory/ \n", testToken+"\n"); err != nil {
		t.Fatal(err)
	}
	fromFile, err := Load(env(nil), home)
	if err != nil {
		t.Fatal(err)
	}
	fromEnv, err := Load(env(map[string]string{"PROMETHEUS_MEMORY_TEAM_URL": "https://team.example:8443/memory/", "PROMETHEUS_MEMORY_TEAM_TOKEN": testToken}), home)
	if err != nil {
		t.Fatal(err)
	}
	if fromFile.URL != "https://team.example:8443/memory" || fromEnv.URL != fromFile.URL || fromEnv.Token != fromFile.Token {
		t.Fatalf("file %+v, environment %+v", fromFile, fromEnv)
	}
}

// A URL that could carry a secret, or that requests could not be sent
// under, is refused by join (which then writes nothing) and from the
// environment, and the refusal does not repeat it.
func TestURLsThatCouldCarryASecretRefused(t *testing.T) {
	for _, u := range []string{
		"https://alice:hunter2@team.example",
		"https://team.example/?key=hunter2",
		"https://team.example/?",
		"https://team.example/#hunter2",
		"ftp://team.example",
		"team.example",
		"",
	} {
		home := t.TempDir()
		err := Join(home, u, testToken)
		if err == nil {
			t.Errorf("join %q: accepted", u)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("join %q: the refusal repeats the secret: %v", u, err)
		}
		if _, serr := os.Stat(Path(home)); !os.IsNotExist(serr) {
			t.Errorf("join %q wrote %s", u, Path(home))
		}
		if u == "" {
			continue
		}
		if _, err := Load(env(map[string]string{"PROMETHEUS_MEMORY_TEAM_URL": u, "PROMETHEUS_MEMORY_TEAM_TOKEN": testToken}), home); err == nil {
			t.Errorf("environment %q: accepted", u)
		}
	}
}

// A team server that redirects is not followed: the token and the
// changes never reach the address it names.
func TestRedirectNotFollowed(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	c := newClient(Config{URL: redirecting.URL, Token: testToken})
	var out map[string]any
	err := c.do(context.Background(), http.MethodPost, "/sync/v1/push", map[string]any{"changes": []any{}}, &out)
	if err == nil {
		t.Fatal("a redirected push succeeded")
	}
	if reached.Load() != 0 {
		t.Fatalf("the redirect was followed %d times", reached.Load())
	}
}
