package main

import (
	"fmt"
	"log/slog"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/progress"
	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
)

func runStats(c *cli, args []string) error {
	f := newFlags(c, "stats").withJSON()
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	return c.app(func(a *app, log *slog.Logger) error {
		st, err := a.Store.Stats(c.ctx)
		if err != nil {
			return err
		}
		if st.Counts == nil {
			st.Counts = []memory.Count{}
		}
		if f.JSON() {
			return printJSON(c.stdout, st)
		}
		w := c.stdout
		fmt.Fprintf(w, "database  %s (%s, schema %d)\n", st.Path, progress.Size(st.Bytes), st.Schema)
		fmt.Fprintf(w, "records   %d in %s and the shared scopes\n", st.Records, server.Plural(int(st.Projects), "project", "projects"))
		if st.Oldest != nil {
			fmt.Fprintf(w, "oldest    %s\nnewest    %s\n", st.Oldest.Format(time.RFC3339), st.Newest.Format(time.RFC3339))
		}
		if len(st.Counts) > 0 {
			fmt.Fprintf(w, "\n%-10s  %-11s  %7s\n", "SCOPE", "TYPE", "RECORDS")
			for _, n := range st.Counts {
				fmt.Fprintf(w, "%-10s  %-11s  %7d\n", n.Scope, n.Type, n.N)
			}
		}
		return nil
	})
}
