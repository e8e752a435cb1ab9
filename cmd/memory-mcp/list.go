package main

import (
	"fmt"
	"log/slog"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// runList lists the memories this project sees. Like search, show, write
// and rm, it calls the tool's own handler, so that it resolves and refuses
// exactly as the tool does.
func runList(c *cli, args []string) error {
	f := newFlags(c, "list").withJSON()
	typ := f.String("type", "", "only this type: working, episodic, semantic or procedural")
	sc := f.String("scope", "", "only this scope: project, workspace, tenant or system")
	tag := f.String("tag", "", "only records with this tag")
	limit := f.Int("limit", 0, "at most this many (default all)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("list: --limit must not be negative")
	}
	return c.app(func(a *app, log *slog.Logger) error {
		srv := server.New(a.App, log)
		var rows []server.ListRow
		var ps []server.Problem
		cursor := ""
		for {
			page := 500
			if *limit > 0 {
				page = min(page, *limit-len(rows))
			}
			_, out, err := srv.List(c.ctx, server.ListIn{Type: *typ, Scope: *sc, Tag: *tag, Limit: page, Cursor: cursor})
			if err != nil {
				return err
			}
			rows = append(rows, out.Records...)
			if cursor == "" {
				ps = out.Problems
			}
			cursor = out.NextCursor
			if cursor == "" || (*limit > 0 && len(rows) >= *limit) {
				break
			}
		}
		printProblems(c.stderr, ps)
		if f.JSON() {
			return printJSON(c.stdout, rows)
		}
		if len(rows) == 0 {
			fmt.Fprintln(c.stderr, "no memories")
			return nil
		}
		w := 3
		for _, r := range rows {
			w = max(w, len(r.Key))
		}
		w = min(w, 40)
		fmt.Fprintf(c.stdout, "%-*s  %-10s  %-9s  %s\n", w, "KEY", "TYPE", "SCOPE", "DESCRIPTION")
		for _, r := range rows {
			fmt.Fprintf(c.stdout, "%-*s  %-10s  %-9s  %s\n", w, r.Key, r.Type, r.Scope, oneLineText(r.Description, 80))
		}
		return nil
	})
}

func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
