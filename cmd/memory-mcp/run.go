package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/schema"
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
		return fmt.Errorf("unknown command %q", schema.Clip(name))
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
