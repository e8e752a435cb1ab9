package main

import (
	"fmt"
	"log/slog"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

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
