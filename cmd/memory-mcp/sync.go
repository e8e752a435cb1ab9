package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"prom.codes/memory-mcp/memory/teamsync"
)

// runSync is sync (one round), sync status, sync restore ID and sync clear.
func runSync(c *cli, args []string) error {
	f := newFlags(c, "sync").withJSON()
	pos, err := f.parse(args, 0, 2)
	if err != nil {
		return err
	}
	tc, err := teamsync.LoadHome(c.getenv)
	if err == nil && !tc.Enabled() {
		err = fmt.Errorf("sync: %w", teamsync.ErrNoTeam)
	}
	if err != nil {
		return err
	}
	return c.app(func(a *app, _ *slog.Logger) error {
		return teamsync.New(a.Store, tc).Command(c.ctx, pos, f.JSON(), c.stdout)
	})
}

// runTeam is team join URL (the token on stdin) and team leave.
func runTeam(c *cli, args []string) error {
	pos, err := newFlags(c, "team").parse(args, 1, 2)
	if err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	switch {
	case err != nil:
		return err
	case pos[0] == "join" && len(pos) == 2:
		tok, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if err := teamsync.Join(home, pos[1], tok); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "joined %s; the token is in %s (mode 0600)\n", pos[1], teamsync.Path(home))
		return nil
	case pos[0] == "leave" && len(pos) == 1:
		if err := teamsync.Leave(home); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, "left the team: nothing more is queued or synced")
		return c.app(func(a *app, _ *slog.Logger) error { return teamsync.Disable(c.ctx, a.Store) })
	}
	return errors.New("team: want join URL (the token on stdin), or leave")
}
