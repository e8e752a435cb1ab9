package server

import (
	"context"
	"net/http"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/bearer"
	"prom.codes/memory-mcp/memory"
	teamlog "prom.codes/memory-mcp/memory/team"
)

// serveSync starts the team's change log and serves its push and pull
// endpoints on mux, behind the same guard as /mcp: the token decides
// whose memory a change may touch and which changes a pull returns.
func (t *team) serveSync(ctx context.Context, mux *http.ServeMux) error {
	l := teamlog.New(t.base.Store)
	if err := l.Enable(ctx); err != nil {
		return err
	}
	h := teamlog.Handler(l, func(r *http.Request) (memory.Token, bool) { return bearer.TokenFrom(r.Context()) }, t.log, t.base.redact)
	mux.Handle("/sync/", t.guard.Wrap(h))
	return nil
}
