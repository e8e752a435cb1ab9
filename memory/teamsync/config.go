// Package teamsync is team sync's machine side: it keeps this machine's
// workspace, tenant and system memory in step with a team server's. Every
// local write of those scopes leaves its name in the store's outbox (the
// migrations' triggers, in the write's own transaction); a round pushes
// what is queued, each change under an id of its own, marks it sent only
// once the server says it stored it, and pulls the team's changes after a
// cursor, applying each page and moving the cursor in one transaction.
// The server's order decides every conflict; the version that lost is
// kept, with both bodies, for sync status and restore. docs/sync.md has
// the model and the wire.
//
// It imports memory, memory/team (the wire), scope and the standard
// library.
package teamsync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"prom.codes/memory-mcp/memory"
)

// Config says which team server a machine syncs with.
type Config struct {
	URL   string // the server's base URL
	Token string // a mem_ token; never printed
	// From says where it came from: "environment" or the file's path.
	From string
}

// Enabled reports whether a team is configured.
func (c Config) Enabled() bool { return c.URL != "" }

// file is the shape of the joined team's file.
type file struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// Path is the file team join writes: ~/.prometheus/team.json.
func Path(home string) string { return filepath.Join(home, ".prometheus", "team.json") }

// Load reads the team's configuration: PROMETHEUS_MEMORY_TEAM_URL and
// PROMETHEUS_MEMORY_TEAM_TOKEN, which win, else the file team join wrote
// under home. No team is a zero Config and no error.
func Load(getenv func(string) string, home string) (Config, error) {
	u, tok := baseURL(getenv("PROMETHEUS_MEMORY_TEAM_URL")), strings.TrimSpace(getenv("PROMETHEUS_MEMORY_TEAM_TOKEN"))
	if u != "" || tok != "" {
		if u == "" || tok == "" {
			return Config{}, errors.New("PROMETHEUS_MEMORY_TEAM_URL and PROMETHEUS_MEMORY_TEAM_TOKEN go together: set both, or neither")
		}
		c := Config{URL: u, Token: tok, From: "environment"}
		return c, c.check()
	}
	p := Path(home)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("team: %w", err)
	}
	// Windows has no file modes to check: the user profile's access list
	// protects the file there, as it does the database.
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return Config{}, fmt.Errorf("team: %s holds a token and others may read it (mode %o): chmod 600 it", p, fi.Mode().Perm())
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Config{}, fmt.Errorf("team: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return Config{}, fmt.Errorf("team: %s does not parse; run memory-mcp team join again", p)
	}
	c := Config{URL: baseURL(f.URL), Token: f.Token, From: p}
	return c, c.check()
}

// baseURL is the team server's URL as it is kept and compared: without
// surrounding space or a trailing slash, so that one server is one team
// however it was written.
func baseURL(s string) string { return strings.TrimRight(strings.TrimSpace(s), "/") }

// check refuses a URL that could carry a secret (a user, a password, a
// query) or that requests could not be sent under (a fragment), so that
// the URL may be shown in errors and status as it is.
func (c Config) check() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(c.URL, "#") {
		return errors.New("team: the URL must be http:// or https://HOST[:PORT][/PATH], without a user, password, query or fragment")
	}
	if !strings.HasPrefix(c.Token, memory.TokenPrefix) || strings.ContainsAny(c.Token, " \t\r\n") {
		return errors.New("team: the token must be a mem_ token, as memory-mcp token create prints")
	}
	return nil
}

// Join stores url and token under home, readable by this user only.
func Join(home, url, token string) error {
	c := Config{URL: baseURL(url), Token: strings.TrimSpace(token)}
	if err := c.check(); err != nil {
		return err
	}
	p := Path(home)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("team join: %w", err)
	}
	b, _ := json.MarshalIndent(file{URL: c.URL, Token: c.Token}, "", "  ")
	tmp, err := os.CreateTemp(filepath.Dir(p), ".team-*.json")
	if err != nil {
		return fmt.Errorf("team join: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("team join: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("team join: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("team join: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("team join: %w", err)
	}
	return nil
}

// Leave removes the file Join wrote; without one it does nothing.
func Leave(home string) error {
	if err := os.Remove(Path(home)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("team leave: %w", err)
	}
	return nil
}
