package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/bearer"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/memory/token"
	"prom.codes/memory-mcp/scope"
)

// maxBody caps a request body: a record's body is at most 64 KiB, and a
// capture a few of those.
const maxBody = 1 << 20

// HTTPOptions say how ServeHTTP serves.
type HTTPOptions struct {
	Addr              string        // host:port to listen on
	CertFile, KeyFile string        // with both, serve HTTPS
	Tenant            string        // "": every tenant's tokens
	Repo              bool          // serve the workspace's repository (App.Root, with its mirror) to Tenant
	Rate              float64       // requests per second per token
	Timeout           time.Duration // to read a request's header, and then its body
	AllowedHosts      []string      // names clients may reach it by, besides Addr's and loopback
}

// team serves every token's caller from one app: each token gets a server
// of its own, seeing the store as its identity does.
type team struct {
	base  *App
	log   *slog.Logger
	guard *bearer.Guard
	repo  memory.Project // with a root: the repository's project, mirrored

	mu      sync.Mutex
	servers map[string]*Server // by token id
}

// ServeHTTP serves a team over MCP Streamable HTTP until ctx ends, then
// drains: every caller bears a token, and each token gets a server of its
// own, seeing the store as its identity does.
func ServeHTTP(ctx context.Context, a *App, log *slog.Logger, o HTTPOptions) error {
	t := &team{base: a, log: log, servers: map[string]*Server{}}
	t.guard = &bearer.Guard{
		Hosts: bearer.NewHosts(o.Addr, o.AllowedHosts...), Tokens: token.Of(a.Store),
		Limiter: bearer.NewLimiter(o.Rate, int(5*o.Rate)), Tenant: o.Tenant,
		Timeout: o.Timeout, MaxBody: maxBody, MaxSessions: maxSessions, Sessions: t.sessions,
		Log: log, Redact: a.redact,
	}
	if !o.Repo {
		// The mirror belongs to one workspace; a team's callers have none.
		if a.Dir != nil {
			a.Dir.Close()
		}
		a.Dir, a.Proj = nil, memory.Project{}
	} else {
		t.repo = memory.Project{ID: repoIdentity(o.Tenant, a.Root), Mirror: a.Dir}
		if err := a.Store.NoteRoot(ctx, t.repo.ID, a.Root); err != nil {
			log.Warn("could not record the project root", "err", err)
		}
		if _, err := a.Store.PurgeMirrored(ctx, t.repo); err != nil {
			return err
		}
		log.Info("serving one repository", "root", a.Root, "tenant", o.Tenant)
	}
	go a.Weaver.Preload()

	// Clients of 2025-11-25 and before open a session with initialize,
	// which lives in the replica that opened it. Those of 2026-07-28 keep
	// none: each request stands alone, on whichever replica gets it. The
	// guard checks every request's Host and Origin, with a proxy's names,
	// in place of the SDK's loopback-only check.
	stateful := mcp.NewStreamableHTTPHandler(t.server, &mcp.StreamableHTTPOptions{
		Logger:                     quieter(log),
		MaxRequestBodyBytes:        maxBody,
		SessionTimeout:             30 * time.Minute,
		DisableLocalhostProtection: true,
	})
	stateless := mcp.NewStreamableHTTPHandler(t.server, &mcp.StreamableHTTPOptions{
		Logger:                     quieter(log),
		MaxRequestBodyBytes:        maxBody,
		Stateless:                  true,
		DisableLocalhostProtection: true,
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			if id, ok := requestWithoutSession(body); ok {
				noSession(w, id)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		stateful.ServeHTTP(w, r)
	})
	verify := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, ok := bearer.TokenFrom(ctx)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		// UserID binds a session to the token that opened it.
		return &auth.TokenInfo{UserID: tok.ID}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})

	mux := http.NewServeMux()
	mux.Handle("/mcp", t.guard.Wrap(verify(h)))
	if err := t.serveSync(ctx, mux); err != nil {
		return err
	}
	// /healthz asks no token, so its answer is kept for a second: a flood
	// of checks costs the database one ping a second, not one each.
	var health struct {
		sync.Mutex
		at  time.Time
		err error
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		health.Lock()
		if time.Since(health.at) >= time.Second {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			health.err = a.Store.Ping(ctx)
			cancel()
			health.at = time.Now()
			if health.err != nil {
				log.Warn("health check: the database does not answer", "err", a.redact(health.err))
			}
		}
		err := health.err
		health.Unlock()
		if err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})

	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: o.Timeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	scheme := "http"
	if o.CertFile != "" {
		scheme = "https"
	}
	log.Info("serving", "url", scheme+"://"+ln.Addr().String()+"/mcp", "db", a.DBName)

	go t.purgeLoop(ctx, 10*time.Minute)
	go t.revokedLoop(ctx, revokedEvery)
	defer a.Embed.Start(ctx)()
	served := make(chan error, 1)
	go func() {
		if o.CertFile != "" {
			served <- hs.ServeTLS(ln, o.CertFile, o.KeyFile)
		} else {
			served <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return t.drain(hs, served)
}

// repoIdentity is the project identity of the repository at root served to
// tenant: a team identity of the tenant, so that its workspace and tenant
// levels are the team's and never the global bucket of this machine's own
// workspaces, under a user and a profile no token can have (their names are
// never empty, and never hold a slash).
func repoIdentity(tenant, root string) scope.Identity {
	return memory.TeamIdentity(tenant, "", "root:"+root)
}

// drain stops taking requests, lets those in flight finish, then ends the
// sessions, whose event streams would otherwise hold their connections open.
func (t *team) drain(hs *http.Server, served chan error) error {
	t.log.Info("draining")
	shut, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- hs.Shutdown(shut) }()
	for deadline := time.Now().Add(15 * time.Second); t.guard.Inflight() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	t.mu.Lock()
	for _, srv := range t.servers {
		for ss := range srv.mcp.Sessions() {
			ss.Close()
		}
	}
	t.mu.Unlock()
	if err := <-done; err != nil {
		// Connections still busy past the grace period are cut.
		t.log.Warn("drain: closing connections still open", "err", err)
		hs.Close()
	}
	<-served
	t.log.Info("stopped")
	return nil
}

func (t *team) purgeLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if n, err := t.base.Store.Purge(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.log.Warn("purge", "err", err)
			} else if n > 0 {
				t.log.Info("purged expired records", "count", n)
			}
			if t.repo.ID != "" {
				if _, err := t.base.Store.PurgeMirrored(ctx, t.repo); err != nil && !errors.Is(err, context.Canceled) {
					t.log.Warn("purge", "err", err)
				}
			}
		}
	}
}

// revokedEvery is how often the server looks for revoked tokens with
// sessions still open. Their next request is refused at once whatever
// this says; ending their sessions closes the event streams they hold and
// frees what the server kept for them.
const revokedEvery = 5 * time.Second

func (t *team) revokedLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := t.endRevoked(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.log.Warn("look for revoked tokens", "err", err)
			}
		}
	}
}

// endRevoked ends the sessions of every token no longer in the store and
// forgets its server and rate.
func (t *team) endRevoked(ctx context.Context) error {
	t.mu.Lock()
	idle := len(t.servers) == 0
	t.mu.Unlock()
	if idle {
		return nil // no session to end: the tokens need not be read
	}
	toks, err := token.Of(t.base.Store).List(ctx)
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(toks))
	for _, tok := range toks {
		live[tok.ID] = true
	}
	gone := map[string]*Server{}
	t.mu.Lock()
	for id, srv := range t.servers {
		if !live[id] {
			gone[id] = srv
			delete(t.servers, id)
		}
	}
	t.mu.Unlock()
	for id, srv := range gone {
		n := 0
		for ss := range srv.mcp.Sessions() {
			ss.Close()
			n++
		}
		t.guard.Limiter.Forget(id)
		t.log.Info("token revoked: its sessions ended", "token", id, "sessions", n)
	}
	return nil
}

// server returns the MCP server of the request's token, made on first use.
func (t *team) server(r *http.Request) *mcp.Server {
	tok, ok := bearer.TokenFrom(r.Context())
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if srv, ok := t.servers[tok.ID]; ok {
		return srv.mcp
	}
	a := *t.base
	a.Project, a.Proj = tok.Identity(), tok.Project()
	if t.repo.ID != "" {
		// The repository's memory, as its engineers' stdio servers have it,
		// with the system level still read-only but for admins.
		a.Project, a.Proj = t.repo.ID, memory.Project{ID: t.repo.ID, Mirror: t.repo.Mirror, ReadOnly: a.Proj.ReadOnly}
	}
	log := t.log.With("token", tok.ID)
	srv := New(&a, log)
	srv.mcp.AddReceivingMiddleware(srv.freshInstructions, logCalls(log))
	t.servers[tok.ID] = srv
	return srv.mcp
}

// freshInstructions brings the index in the instructions up to date before
// an initialize or a discovery: a team server lives long, and nothing else
// refreshes it for each identity.
func (srv *Server) freshInstructions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "initialize" || method == "server/discover" {
			srv.refreshInstructions(ctx)
		}
		return next(ctx, method, req)
	}
}

// logCalls logs every tool call with its outcome: ok, or the error's code.
// Never the arguments or the result.
func logCalls(log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			start := time.Now()
			res, err := next(ctx, method, req)
			tool := ""
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				tool = bearer.LogName(p.Name)
			}
			outcome := "ok"
			if err != nil {
				outcome = "error"
			} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
				outcome = "error"
				if len(r.Content) > 0 {
					if tc, ok := r.Content[0].(*mcp.TextContent); ok {
						if code, _, ok := strings.Cut(tc.Text, ":"); ok && hasCode(tc.Text) {
							outcome = code
						}
					}
				}
			}
			log.Info("call", "method", bearer.LogName(method), "tool", tool, "outcome", outcome, "ms", time.Since(start).Milliseconds())
			return res, err
		}
	}
}

// maxSessions caps the sessions one token holds open at once.
const maxSessions = 256

// sessions counts the open sessions of token id.
func (t *team) sessions(id string) int {
	t.mu.Lock()
	srv, ok := t.servers[id]
	t.mu.Unlock()
	n := 0
	if ok {
		for range srv.mcp.Sessions() {
			n++
		}
	}
	return n
}

// requestWithoutSession reports whether body, posted without a session by
// a client of 2025-11-25 or before, is a request other than initialize,
// and returns its id. The SDK would answer it with error code 0; the
// transport wants such requests refused with 400 (an Invalid Request).
// Notifications, batches and anything undecodable go on to the SDK.
func requestWithoutSession(body []byte) (json.RawMessage, bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, false
	}
	if len(msg.ID) == 0 || string(msg.ID) == "null" || msg.Method == "" || msg.Method == "initialize" || msg.Method == "server/discover" {
		return nil, false
	}
	// A request that names its revision in _meta stands alone (2026-07-28)
	// even without the header; the SDK serves it.
	if _, ok := msg.Params.Meta["io.modelcontextprotocol/protocolVersion"]; ok {
		return nil, false
	}
	return msg.ID, true
}

// noSession answers a request that came before initialize.
func noSession(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error": map[string]any{
			"code":    jsonrpc.CodeInvalidRequest,
			"message": "no session: send initialize first, or speak MCP 2026-07-28",
		},
	})
}
