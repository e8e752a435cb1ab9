package server

import (
	"context"
	"io"
	"log/slog"
	"time"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/stdio"
)

// ServeStdio serves a over stdin and stdout, as an agent launches the
// server, until stdin ends or ctx does. Meanwhile it keeps the saved
// instructions current, purges expired records and runs the embedding
// worker.
func ServeStdio(ctx context.Context, a *App, log *slog.Logger, stdin io.Reader, stdout io.Writer) error {
	srv := New(a, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		srv.instructionsLoop(ctx)
	}()
	go srv.purgeLoop(ctx, 10*time.Minute)
	stopEmbedding := a.Embed.Start(ctx)
	log.Debug("serving", "db", a.DBName, "root", a.Root)
	err := stdio.Serve(ctx, srv.mcp, stdin, stdout, log)
	// Let the last change reach the saved instructions before the
	// database closes; weaving them reads the project's records, which
	// takes longer on a loaded machine. Clients wait 5 s for an exit.
	cancel()
	stopEmbedding()
	select {
	case <-loop:
	case <-time.After(4 * time.Second):
	}
	return err
}
