package main

import (
	"fmt"
	"io"
	"log/slog"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

func runRead(c *cli, args []string) error {
	f := newFlags(c, "read").withJSON()
	query := f.String("query", "", "put memories relevant to this first")
	maxTokens := f.Int("max-tokens", 0, "token budget (default PROMETHEUS_MEMORY_TOKEN_BUDGET or 1500)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if *maxTokens < 0 {
		return fmt.Errorf("read: --max-tokens must not be negative")
	}
	return c.app(func(a *app, log *slog.Logger) error {
		rep, err := a.Sync(c.ctx)
		if err != nil {
			return err
		}
		printProblems(c.stderr, server.Problems(rep))
		b, err := a.Recall(c.ctx, *query, nil, *maxTokens)
		if err != nil {
			return err
		}
		if f.JSON() {
			return printJSON(c.stdout, server.ReadOut{Block: b.Markdown, Tokens: b.Tokens, Included: b.Included, Omitted: b.Omitted, Problems: server.Problems(rep)})
		}
		if b.Markdown != "" {
			_, err = io.WriteString(c.stdout, b.Markdown+"\n")
		}
		return err
	})
}
