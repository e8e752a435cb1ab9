package main

import (
	"fmt"
	"log/slog"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

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
