package main

import (
	"context"
	"log/slog"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/server"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/semantic"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/weave"
)

// app is the server's App with the Config it was opened from.
type app struct {
	*server.App
	cfg Config
}

func openApp(ctx context.Context, cfg Config, log *slog.Logger) (*app, error) {
	return openAppWith(ctx, cfg, log, nil)
}

// openAppWith is openApp with the store opened with opts.
func openAppWith(ctx context.Context, cfg Config, log *slog.Logger, opts *memory.Options) (*app, error) {
	dir, err := mirror.Open(cfg.Root)
	if err != nil {
		return nil, err
	}
	dir.SetLogger(log)
	st, err := openStore(ctx, cfg.DB(), opts)
	if err != nil {
		return nil, cfg.dbError(err)
	}
	a := &app{cfg: cfg, App: &server.App{
		Store: st, Vectors: semantic.New(st), Dir: dir, Proj: memory.Project{ID: cfg.Project, Mirror: dir}, Weaver: weave.New(), Log: log,
		Project: cfg.Project, Root: cfg.Root, TokenBudget: cfg.TokenBudget, Confirmations: cfg.Confirmations,
		Version: serverVersion(), DBName: cfg.DBName(), Redact: cfg.redact,
	}}
	// Open purged the rest already.
	if _, err := st.PurgeMirrored(ctx, a.Proj); err != nil {
		st.Close()
		return nil, err
	}
	if a.Embed, err = newWorker(cfg, a.Vectors, log); err != nil {
		st.Close()
		return nil, err
	}
	return a, nil
}
