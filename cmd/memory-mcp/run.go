package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
)

// run is the whole program: args without the program name, the environment,
// and the three standard streams. The commands are in cli.go.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	db, args, err := dbFlag(args)
	if err != nil {
		return err
	}
	getenv = withDB(getenv, db)
	name := "serve"
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch name {
	case "--version", "-v":
		name = "version"
	case "--help", "-h":
		name = "help"
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprint(stderr, usage())
		return fmt.Errorf("unknown command %q", clipArg(name))
	}
	c := &cli{ctx: ctx, getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	err = cmd.run(c, args)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// wantsHelp reports whether args ask for help anywhere.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

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
		for _, p := range rep.Problems {
			fmt.Fprintf(c.stderr, "memory-mcp: %s not accepted: %s\n", p.Path, p.Reason)
		}
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

// defaulting is getenv with a default for one variable.
func defaulting(getenv func(string) string, name, value string) func(string) string {
	return func(k string) string {
		if v := getenv(k); v != "" || k != name {
			return v
		}
		return value
	}
}

func withApp(ctx context.Context, getenv func(string) string, stderr io.Writer, fn func(*app, *slog.Logger) error) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	a, err := openApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	// Remember where this project lives, for projects and projects move.
	if err := a.Store.NoteRoot(ctx, cfg.Project, cfg.Root); err != nil {
		log.Warn("could not record the project root", "err", err)
	}
	return fn(a, log)
}

func runToken(c *cli, args []string) error {
	if wantsHelp(args) {
		fmt.Fprint(c.stdout, tokenUsage)
		return errHelp
	}
	return tokenCmd(c.ctx, args, defaulting(c.getenv, "PROMETHEUS_MEMORY_LOG_LEVEL", "warn"), c.stdout, c.stderr)
}
