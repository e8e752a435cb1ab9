package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"
)

const usage = `memory-mcp: memory for coding agents, served over MCP on stdio.

Usage:
  memory-mcp                                serve MCP on stdin/stdout
  memory-mcp read [--query Q] [--max-tokens N]
                                            print the woven recall block
  memory-mcp capture                        record a session from a payload on stdin
                                            (memory_capture JSON or a Claude Code SessionEnd hook payload)
  memory-mcp serve --http ADDR              serve a team over MCP Streamable HTTP (see serve --help)
  memory-mcp token create|list|revoke       manage the team server's bearer tokens
  memory-mcp version                        print the version

Environment:
  PROMETHEUS_MEMORY_DB_PATH        database file (default ~/.prometheus/memory.db)
  PROMETHEUS_WORKSPACE_ROOT        workspace root (default: git top-level, else working directory)
  PROMETHEUS_MEMORY_TOKEN_BUDGET   recall budget in tokens (default 1500)
  PROMETHEUS_MEMORY_CONFIRMATIONS  sessions confirming a statement before it becomes a fact (default 2)
  PROMETHEUS_MEMORY_LOG_LEVEL      debug, info, warn or error (default info); logs go to stderr
`

// run is the whole program: args without the program name, the environment,
// and the three standard streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	if cmd != "serve" {
		// A hook's stderr reaches the user: only warnings, unless asked.
		getenv = defaulting(getenv, "PROMETHEUS_MEMORY_LOG_LEVEL", "warn")
	}
	switch cmd {
	case "serve":
		if len(args) > 0 {
			return serveCmd(ctx, args, getenv, stderr)
		}
		return withApp(ctx, getenv, stderr, func(a *app, log *slog.Logger) error { return serve(ctx, a, log, stdin, stdout) })
	case "read":
		fs := flag.NewFlagSet("read", flag.ContinueOnError)
		fs.SetOutput(stderr)
		query := fs.String("query", "", "put memories relevant to this first")
		maxTokens := fs.Int("max-tokens", 0, "token budget (default PROMETHEUS_MEMORY_TOKEN_BUDGET or 1500)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if *maxTokens < 0 {
			return fmt.Errorf("read: --max-tokens must not be negative")
		}
		return withApp(ctx, getenv, stderr, func(a *app, log *slog.Logger) error {
			rep, err := a.sync(ctx)
			if err != nil {
				return err
			}
			for _, p := range rep.Problems {
				fmt.Fprintf(stderr, "memory-mcp: %s not accepted: %s\n", p.Path, p.Reason)
			}
			b, err := a.recall(ctx, *query, nil, *maxTokens)
			if err != nil {
				return err
			}
			if b.Markdown != "" {
				_, err = io.WriteString(stdout, b.Markdown+"\n")
			}
			return err
		})
	case "capture":
		return withApp(ctx, getenv, stderr, func(a *app, log *slog.Logger) error { return captureCLI(ctx, a, stdin, stdout) })
	case "token":
		return tokenCmd(ctx, args, getenv, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "memory-mcp", version)
		return nil
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
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
	return fn(a, log)
}

func serve(ctx context.Context, a *app, log *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	srv := newServer(a, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The tokenizer takes a while to load; initialize must not wait for it.
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		srv.instructionsLoop(ctx)
	}()
	go srv.purgeLoop(ctx, 10*time.Minute)
	log.Debug("serving", "db", a.cfg.DBPath, "root", a.cfg.Root)
	err := serveStdio(ctx, srv.mcp, stdin, stdout, log)
	// Let the last change reach the saved instructions before the
	// database closes. Without the tokenizer there is nothing to refresh,
	// and a load still under way is not waited for.
	cancel()
	if srv.app.weaver.Ready() {
		select {
		case <-loop:
		case <-time.After(2 * time.Second):
		}
	}
	return err
}
