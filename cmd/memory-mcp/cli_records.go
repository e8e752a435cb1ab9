package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// The record commands call the tools' own handlers, so they resolve and
// refuse exactly as the tools do.

var examples = map[string]string{
	"read":     "  memory-mcp read --query \"database migrations\"\n",
	"capture":  "  echo '{\"session_id\":\"s1\",\"statements\":[\"tests run with make test\"]}' | memory-mcp capture\n",
	"list":     "  memory-mcp list --type semantic --tag go\n",
	"search":   "  memory-mcp search \"how do we run tests\"\n",
	"show":     "  memory-mcp show test-runner\n",
	"write":    "  echo 'Run make test; it sets up the fixtures.' | memory-mcp write test-runner --tag testing\n",
	"rm":       "  memory-mcp rm test-runner --type semantic\n",
	"export":   "  memory-mcp export --out memories.jsonl\n",
	"import":   "  memory-mcp import memories.jsonl\n  memory-mcp import memory.json --format server-memory --dry-run\n",
	"backup":   "  memory-mcp backup ~/memory-backup.db\n",
	"restore":  "  memory-mcp restore ~/memory-backup.db\n",
	"doctor":   "  memory-mcp doctor\n",
	"stats":    "  memory-mcp stats --json\n",
	"projects": "  memory-mcp projects\n  memory-mcp projects move ~/old/checkout ~/new/checkout\n",
	"setup":    "  memory-mcp setup claude-code\n",
	"version":  "  memory-mcp version\n",
}

func printProblems(w io.Writer, ps []server.Problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "memory-mcp: %s not accepted: %s\n", p.Path, p.Reason)
	}
}

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

func runSearch(c *cli, args []string) error {
	f := newFlags(c, "search").withJSON()
	typ := f.String("type", "", "only this type")
	sc := f.String("scope", "", "only this scope")
	limit := f.Int("limit", 10, "at most this many results (1-100)")
	mode := f.String("mode", "", "keyword, semantic or hybrid (default hybrid with embeddings configured, else keyword)")
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		srv := server.New(a.App, log)
		_, out, err := srv.Search(c.ctx, server.SearchIn{Query: strings.Join(pos, " "), Type: *typ, Scope: *sc, Limit: *limit, Mode: *mode})
		if err != nil {
			return err
		}
		printProblems(c.stderr, out.Problems)
		if out.Note != "" {
			fmt.Fprintf(c.stderr, "note: %s\n", out.Note)
		}
		if f.JSON() {
			return printJSON(c.stdout, out.Results)
		}
		if len(out.Results) == 0 {
			fmt.Fprintln(c.stderr, "no matches")
			return nil
		}
		for _, h := range out.Results {
			fmt.Fprintf(c.stdout, "%s  [%s, %s]  %.2f\n", h.Key, h.Type, h.Scope, h.Score)
			if h.Description != "" {
				fmt.Fprintf(c.stdout, "    %s\n", oneLineText(h.Description, 100))
			}
			if h.Preview != "" && h.Preview != h.Description {
				fmt.Fprintf(c.stdout, "    %s\n", oneLineText(h.Preview, 100))
			}
		}
		return nil
	})
}

// selectFlags are the flags that pick one record.
func selectFlags(f *flags) (typ, sc, id *string) {
	return f.String("type", "", "the record's type, when the key names several"),
		f.String("scope", "", "this scope only, instead of the narrowest"),
		f.String("id", "", "the record's id, instead of a key")
}

func selection(name string, pos []string, typ, sc, id string) (server.SelectIn, error) {
	in := server.SelectIn{ID: id, Type: typ, Scope: sc}
	if len(pos) == 1 {
		in.Key = pos[0]
	}
	switch {
	case in.Key == "" && in.ID == "":
		return in, fmt.Errorf("%s: which record? give its KEY, or --id ID", name)
	case in.Key != "" && in.ID != "":
		return in, fmt.Errorf("%s: give a KEY or --id, not both", name)
	}
	return in, nil
}

func runShow(c *cli, args []string) error {
	f := newFlags(c, "show").withJSON()
	typ, sc, id := selectFlags(f)
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	in, err := selection("show", pos, *typ, *sc, *id)
	if err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		srv := server.New(a.App, log)
		text, out, err := srv.Read(c.ctx, server.ReadIn{Key: in.Key, ID: in.ID, Type: in.Type, Scope: in.Scope})
		if err != nil {
			return err
		}
		if f.JSON() {
			return printJSON(c.stdout, out.Record)
		}
		printProblems(c.stderr, out.Problems)
		if i := strings.Index(text, "\n\nMarkdown files not accepted"); i >= 0 {
			text = text[:i]
		}
		_, err = fmt.Fprintln(c.stdout, text)
		return err
	})
}

func runRm(c *cli, args []string) error {
	f := newFlags(c, "rm").withJSON()
	typ, sc, id := selectFlags(f)
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	in, err := selection("rm", pos, *typ, *sc, *id)
	if err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		srv := server.New(a.App, log)
		_, out, err := srv.Delete(c.ctx, in)
		if err != nil {
			return err
		}
		printProblems(c.stderr, out.Problems)
		if f.JSON() {
			return printJSON(c.stdout, out.Deleted)
		}
		d := out.Deleted
		fmt.Fprintf(c.stdout, "deleted %s %s %q (id %s)\n", d.Scope, d.Type, d.Key, d.ID)
		return nil
	})
}

func runCapture(c *cli, args []string) error {
	f := newFlags(c, "capture").withJSON()
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return captureCLI(c.ctx, defaulting(c.getenv, "PROMETHEUS_MEMORY_LOG_LEVEL", "warn"), c.stdin, c.stdout, c.stderr, f.JSON())
}
