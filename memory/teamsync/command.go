package teamsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"prom.codes/memory-mcp/memory"
)

// LoadHome is Load with the user's home directory.
func LoadHome(getenv func(string) string) (Config, error) {
	home, _ := os.UserHomeDir()
	return Load(getenv, home)
}

// ErrNoTeam is the error of a command that needs a team when none is
// joined.
var ErrNoTeam = errors.New("no team joined: run memory-mcp team join URL (the token on stdin), or set PROMETHEUS_MEMORY_TEAM_URL and PROMETHEUS_MEMORY_TEAM_TOKEN")

// Command runs the sync command's forms, args after "sync": none (one
// round), "status", "restore ID" or "clear"; it prints to w for people, or JSON.
func (s *Syncer) Command(ctx context.Context, args []string, asJSON bool, w io.Writer) error {
	out := func(v any, text string) error {
		if asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(v)
		}
		_, err := io.WriteString(w, text)
		return err
	}
	switch {
	case len(args) == 0:
		n, err := s.Round(ctx)
		if err != nil {
			return err
		}
		return out(n, fmt.Sprintf("pushed %d, pulled %d, conflicts %d\n", n.Pushed, n.Pulled, n.Conflicts))
	case len(args) == 1 && args[0] == "status":
		st, err := s.Status(ctx)
		if err != nil {
			return err
		}
		var b strings.Builder
		st.Print(&b)
		return out(st, b.String())
	case len(args) == 1 && args[0] == "clear":
		aside, conflicts, err := s.Clear(ctx)
		if err != nil {
			return err
		}
		return out(map[string]int{"set_aside": aside, "conflicts": conflicts},
			fmt.Sprintf("forgot %d changes set aside and %d conflicts\n", aside, conflicts))
	case len(args) == 2 && args[0] == "restore":
		id, err := strconv.ParseInt(strings.TrimPrefix(args[1], "#"), 10, 64)
		if err != nil {
			return errors.New("sync restore: want a conflict's number, as sync status shows it")
		}
		k, err := s.Restore(ctx, id)
		if err != nil {
			return err
		}
		return out(k, fmt.Sprintf("restored %s/%s/%s as it was on this machine; the next sync sends it\n", k.Scope, k.Type, k.Key))
	}
	return fmt.Errorf("sync: unknown form %q (want status, restore ID, or clear)", strings.Join(args, " "))
}

// Start starts the stdio server's own syncing of st, when a team is
// joined, every PROMETHEUS_MEMORY_SYNC_INTERVAL (a Go duration; default
// 30s; 0 turns it off), and returns what stops it.
func Start(st *memory.Store, getenv func(string) string, log *slog.Logger) (stop func(), err error) {
	cfg, err := LoadHome(getenv)
	every := 30 * time.Second
	if v := strings.TrimSpace(getenv("PROMETHEUS_MEMORY_SYNC_INTERVAL")); v != "" && err == nil {
		if every, err = time.ParseDuration(v); err != nil || every < 0 {
			err = fmt.Errorf("PROMETHEUS_MEMORY_SYNC_INTERVAL=%q: want a duration like 30s, or 0 for off", v)
		}
	}
	if err != nil || !cfg.Enabled() || every == 0 {
		return func() {}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		New(st, cfg).Run(ctx, every, log)
	}()
	return func() { cancel(); <-done }, nil
}

// Doctor checks sync for doctor: nothing (detail "") without a team. open
// opens the store.
func Doctor(ctx context.Context, getenv func(string) string, open func() (*memory.Store, error)) (ok bool, detail, fix string) {
	cfg, err := LoadHome(getenv)
	if err != nil {
		return false, err.Error(), "run memory-mcp team join URL again, or fix the environment"
	}
	if !cfg.Enabled() {
		return true, "", ""
	}
	st, err := open()
	if err != nil {
		return false, "cannot open the database to read the sync state", "see the database check"
	}
	defer st.Close()
	return New(st, cfg).Health(ctx)
}
