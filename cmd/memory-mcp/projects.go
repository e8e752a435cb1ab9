package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
)

func runProjects(c *cli, args []string) error {
	if len(args) > 0 && args[0] == "move" {
		return runProjectsMove(c, args[1:])
	}
	f := newFlags(c, "projects").withJSON()
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		ps, err := a.Store.Projects(c.ctx)
		if err != nil {
			return err
		}
		if ps == nil {
			ps = []memory.ProjectInfo{}
		}
		if f.JSON() {
			return printJSON(c.stdout, ps)
		}
		fmt.Fprintf(c.stdout, "%-8s  %7s  %-20s  %s\n", "PROJECT", "RECORDS", "LAST USED", "ROOT")
		for _, p := range ps {
			last := "-"
			if p.LastUsed != nil {
				last = p.LastUsed.Local().Format("2006-01-02 15:04")
			}
			root := p.Root
			if root == "" {
				root = "(unknown)"
			}
			mark := ""
			if p.ID == a.cfg.Project {
				mark = "  (this project)"
			}
			fmt.Fprintf(c.stdout, "%-8s  %7d  %-20s  %s%s\n", string(p.ID)[:8], p.Records, last, root, mark)
		}
		return nil
	})
}

func runProjectsMove(c *cli, args []string) error {
	f := newFlags(c, "projects").withJSON()
	f.cmd.args = "move OLD_ROOT NEW_ROOT [--json]"
	f.cmd.summary = "carry a project's records from its old root to its new one (a moved or re-cloned checkout)"
	pos, err := f.parse(args, 2, 2)
	if err != nil {
		return err
	}
	// The old root may be gone: clean it as the server would have, without
	// resolving symlinks it no longer has. The new one is resolved as a
	// server there will resolve it.
	old, err := filepath.Abs(pos[0])
	if err != nil {
		return fmt.Errorf("projects move: %w", err)
	}
	if real, err := filepath.EvalSymlinks(old); err == nil {
		old = real
	}
	fi, err := os.Stat(pos[1])
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("projects move: the new root %s is not a directory", pos[1])
	}
	to, err := scope.Root(pos[1], "")
	if err != nil {
		return fmt.Errorf("projects move: %w", err)
	}
	return c.app(func(a *app, log *slog.Logger) error {
		n, err := a.Store.MoveProject(c.ctx, scope.IdentityOf(old), scope.IdentityOf(to), to)
		if err != nil {
			return fmt.Errorf("projects move: %w", err)
		}
		out := struct {
			From    string `json:"from"`
			To      string `json:"to"`
			Records int    `json:"records"`
		}{old, to, n}
		if f.JSON() {
			return printJSON(c.stdout, out)
		}
		fmt.Fprintf(c.stdout, "moved %d records from %s to %s\n", n, old, to)
		return nil
	})
}
