package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/secrets"
)

// maxBody caps a request body: a record's body is at most 64 KiB, and a
// capture a few of those.
const maxBody = 1 << 20

// httpOptions are serve --http's flags.
type httpOptions struct {
	addr, certFile, keyFile string
	root, tenant            string        // with a root, the one repository served, to the one tenant
	rate                    float64       // requests per second per token
	timeout                 time.Duration // to read a request's header, and then its body
	allowed                 []string      // host names besides the listen address's and loopback
}

const serveUsage = `Usage: memory-mcp serve --http ADDR [--tls-cert FILE --tls-key FILE] [--rate N] [--timeout D]
                        [--root DIR --tenant T] [--allowed-host NAME]...

Serves MCP over Streamable HTTP at http://ADDR/mcp to callers bearing a token
made with "memory-mcp token create"; GET /healthz answers 200 while the
database does. SIGTERM or Ctrl-C finishes the requests in flight and exits.

Each token's profile has its own project memory, and no markdown mirror.
With --root DIR --tenant T the server serves the one repository checked out
at DIR to team T instead: project memory is the repository's, shared by
every token of T and mirrored to DIR/.prometheus/memories as on stdio, and
tokens of any other tenant are refused.

The store is the SQLite file, or PostgreSQL with PROMETHEUS_MEMORY_DB_URL (or
--db) set to a postgres:// URL: then several replicas may serve one database,
behind a load balancer that keeps each session (its Mcp-Session-Id) on one
replica (clients of MCP 2026-07-28 keep no session: any replica serves
them). /healthz answers 503 while the database does not.

A request must name the server by a loopback name, its address, the host
of --http, or an --allowed-host (or PROMETHEUS_MEMORY_ALLOWED_HOSTS, split
at commas) in its Host header, and in its Origin header if it has one:
behind a proxy, allow the name clients reach it by. Others get 403.
`

// serveFlags is serve's flag set, filling o; its usage goes to w.
func serveFlags(o *httpOptions, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() { fmt.Fprint(w, serveUsage, "\nFlags:\n"); fs.PrintDefaults() }
	fs.StringVar(&o.addr, "http", "", "serve MCP over HTTP on this address (host:port)")
	fs.StringVar(&o.certFile, "tls-cert", "", "TLS certificate file (PEM); with --tls-key, serve HTTPS")
	fs.StringVar(&o.keyFile, "tls-key", "", "TLS private key file (PEM)")
	fs.Float64Var(&o.rate, "rate", 20, "requests per second allowed to each token, in bursts of up to 5 seconds' worth")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long a client may take to send a request's header, and then its body")
	fs.StringVar(&o.root, "root", "", "serve this repository's project memory, with its markdown mirror (needs --tenant)")
	fs.StringVar(&o.tenant, "tenant", "", "accept only tokens of this tenant")
	fs.Func("allowed-host", "a host name clients may reach the server by, as through a proxy (repeatable)", func(s string) error {
		o.allowed = append(o.allowed, splitHosts(s)...)
		return nil
	})
	return fs
}

// serveCmd is "serve" with flags: today only --http.
func serveCmd(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	var o httpOptions
	fs := serveFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.addr == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("serve: want --http ADDR")
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	if o.rate <= 0 || o.timeout <= 0 {
		return errors.New("serve: --rate and --timeout must be positive")
	}
	o.allowed = append(o.allowed, splitHosts(getenv("PROMETHEUS_MEMORY_ALLOWED_HOSTS"))...)
	if o.root != "" {
		// One repository's memory shared by every tenant would let each
		// see the others': a root is served to one team only.
		if o.tenant == "" {
			return errors.New("serve: --root needs --tenant, the one team whose tokens share the repository's memory")
		}
		fi, err := os.Stat(o.root)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("serve: --root %s is not a directory", o.root)
		}
		abs, err := filepath.Abs(o.root)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		env := getenv
		getenv = func(k string) string {
			if k == "PROMETHEUS_WORKSPACE_ROOT" {
				return abs
			}
			return env(k)
		}
	}
	return withApp(ctx, getenv, stderr, func(a *app, log *slog.Logger) error { return serveHTTP(ctx, a, log, o) })
}

// team serves every token's caller from one app: each token gets a server
// of its own, seeing the store as its identity does.
type team struct {
	base    *app
	log     *slog.Logger
	limiter *limiter
	hosts   hosts
	tenant  string         // "": every tenant's tokens
	repo    memory.Project // with a root: the repository's project, mirrored

	mu      sync.Mutex
	servers map[string]*server // by token id

	inflight atomic.Int64 // requests being answered, not counting event streams
}

func serveHTTP(ctx context.Context, a *app, log *slog.Logger, o httpOptions) error {
	t := &team{base: a, log: log, limiter: newLimiter(o.rate, int(5*o.rate)), servers: map[string]*server{}, tenant: o.tenant,
		hosts: newHosts(o.addr, o.allowed...)}
	if o.root == "" {
		// The mirror belongs to one workspace; a team's callers have none.
		if a.dir != nil {
			a.dir.Close()
		}
		a.dir, a.proj = nil, memory.Project{}
	} else {
		t.repo = memory.Project{ID: repoIdentity(o.tenant, a.cfg.Root), Mirror: a.dir}
		if err := a.store.NoteRoot(ctx, t.repo.ID, a.cfg.Root); err != nil {
			log.Warn("could not record the project root", "err", err)
		}
		if _, err := a.store.PurgeMirrored(ctx, t.repo); err != nil {
			return err
		}
		log.Info("serving one repository", "root", a.cfg.Root, "tenant", o.tenant)
	}
	go a.weaver.Preload()

	// Clients of 2025-11-25 and before open a session with initialize,
	// which lives in the replica that opened it. Those of 2026-07-28 keep
	// none: each request stands alone, on whichever replica gets it.
	// guard checks the Host and Origin of each request, with the allowed
	// names of a proxy, in place of the SDK's loopback-only check.
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
	verify := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, ok := ctx.Value(tokenKey{}).(memory.Token)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		// UserID binds a session to the token that opened it.
		return &auth.TokenInfo{UserID: tok.ID}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})

	mux := http.NewServeMux()
	mux.Handle("/mcp", t.guard(verify(stateful), verify(stateless), o.timeout))
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
			health.err = a.store.Ping(ctx)
			cancel()
			health.at = time.Now()
			if health.err != nil {
				log.Warn("health check: the database does not answer", "err", redact(health.err, dbSecrets(a.cfg.DBURL)))
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

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: o.timeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	scheme := "http"
	if o.certFile != "" {
		scheme = "https"
	}
	log.Info("serving", "url", scheme+"://"+ln.Addr().String()+"/mcp", "db", a.cfg.DBName())

	go t.purgeLoop(ctx, 10*time.Minute)
	go t.revokedLoop(ctx, revokedEvery)
	defer a.sem.start(ctx)()
	served := make(chan error, 1)
	go func() {
		if o.certFile != "" {
			served <- hs.ServeTLS(ln, o.certFile, o.keyFile)
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
	for deadline := time.Now().Add(15 * time.Second); t.inflight.Load() > 0 && time.Now().Before(deadline); {
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
			if n, err := t.base.store.Purge(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.log.Warn("purge", "err", err)
			} else if n > 0 {
				t.log.Info("purged expired records", "count", n)
			}
			if t.repo.ID != "" {
				if _, err := t.base.store.PurgeMirrored(ctx, t.repo); err != nil && !errors.Is(err, context.Canceled) {
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
	toks, err := t.base.store.Tokens(ctx)
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(toks))
	for _, tok := range toks {
		live[tok.ID] = true
	}
	gone := map[string]*server{}
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
		t.limiter.forget(id)
		t.log.Info("token revoked: its sessions ended", "token", id, "sessions", n)
	}
	return nil
}

type tokenKey struct{}

// server returns the MCP server of the request's token, made on first use.
func (t *team) server(r *http.Request) *mcp.Server {
	tok, ok := r.Context().Value(tokenKey{}).(memory.Token)
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if srv, ok := t.servers[tok.ID]; ok {
		return srv.mcp
	}
	a := *t.base
	a.cfg.Project, a.proj = tok.Identity(), tok.Project()
	if t.repo.ID != "" {
		// The repository's memory, as its engineers' stdio servers have it,
		// with the system level still read-only but for admins.
		a.cfg.Project, a.proj = t.repo.ID, memory.Project{ID: t.repo.ID, Mirror: t.repo.Mirror, ReadOnly: a.proj.ReadOnly}
	}
	log := t.log.With("token", tok.ID)
	srv := newServer(&a, log)
	srv.mcp.AddReceivingMiddleware(srv.freshInstructions, logCalls(log))
	t.servers[tok.ID] = srv
	return srv.mcp
}

// freshInstructions brings the index in the instructions up to date before
// an initialize: a team server lives long, and nothing else refreshes it
// for each identity.
func (srv *server) freshInstructions(next mcp.MethodHandler) mcp.MethodHandler {
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
				tool = logName(p.Name)
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
			log.Info("call", "method", logName(method), "tool", tool, "outcome", outcome, "ms", time.Since(start).Milliseconds())
			return res, err
		}
	}
}

// unauthorized answers a request without a live token. A request that
// bore a token that is wrong, revoked or expired says error="invalid_token"
// (RFC 6750 §3), so that a client asks for another token rather than
// starting a sign-in; one that bore none gets no error (§3.1). It does not
// tell a wrong token from a revoked one.
func unauthorized(w http.ResponseWriter, bore bool) {
	challenge := `Bearer realm="memory-mcp"`
	if bore {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// guard checks the host and origin of, authenticates, rate-limits, caps and
// times the body of, and logs every request before it reaches the MCP
// handler: stateless for requests of 2026-07-28 and for discovery, which
// needs no session, stateful for the others.
func (t *team) guard(stateful, stateless http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		var tokID, method, tool string
		defer func() {
			t.log.Info("request", "token", tokID, "http", r.Method, "method", method, "tool", tool,
				"status", sw.status, "ms", time.Since(start).Milliseconds())
		}()
		if r.Method != http.MethodGet {
			t.inflight.Add(1)
			defer t.inflight.Add(-1)
		}
		if why := t.hosts.check(r); why != "" {
			http.Error(sw, why, http.StatusForbidden)
			return
		}
		f := strings.Fields(r.Header.Get("Authorization"))
		if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
			unauthorized(sw, false)
			return
		}
		tok, err := t.base.store.Authenticate(r.Context(), f[1])
		if errors.Is(err, memory.ErrNotFound) {
			unauthorized(sw, true)
			return
		}
		if err != nil {
			t.log.Warn("authenticate", "err", redact(err, dbSecrets(t.base.cfg.DBURL)))
			sw.Header().Set("Retry-After", "1")
			http.Error(sw, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		tokID = tok.ID
		if t.tenant != "" && tok.Tenant != t.tenant {
			http.Error(sw, "this server serves another team", http.StatusForbidden)
			return
		}
		if wait, ok := t.limiter.allow(tok.ID, time.Now()); !ok {
			sw.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(sw, "too many requests", http.StatusTooManyRequests)
			return
		}
		if r.Body != nil && r.Method == http.MethodPost {
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(timeout))
			body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil {
				// The deadline stays passed, so the server does not wait
				// for the rest of the body before answering.
				sw.Header().Set("Connection", "close")
				http.Error(sw, "could not read the request", http.StatusRequestTimeout)
				return
			}
			rc.SetReadDeadline(time.Time{})
			if len(body) > maxBody {
				http.Error(sw, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			method, tool = peek(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if method == "initialize" && r.Header.Get("Mcp-Session-Id") == "" && t.sessions(tok.ID) >= maxSessions {
				sw.Header().Set("Retry-After", "60")
				http.Error(sw, "too many open sessions for this token: close some, or wait for idle ones to end", http.StatusTooManyRequests)
				return
			}
		}
		next := stateful
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" || method == "server/discover" {
			next = stateless
		}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
	})
}

// maxSessions caps the sessions one token holds open at once: each costs
// memory until its client ends it or it idles out, and a client that opens
// them without end must not exhaust the server.
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

// peek reads the JSON-RPC method, and the tool's name for a call, for the
// log.
func peek(body []byte) (method, tool string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return "", ""
	}
	if m.Method == "tools/call" {
		tool = m.Params.Name
	}
	return logName(m.Method), logName(tool)
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,64}$`)

// logName is a method or tool name a client gave, fit for the log. Real
// names are short and plain; anything else is not repeated, nor is a name
// shaped like a token or any other secret (a client that pasted one in the
// wrong place must not have it written down).
func logName(s string) string {
	switch {
	case s == "":
		return ""
	case !plainName.MatchString(s):
		return "(invalid)"
	case strings.Contains(s, memory.TokenPrefix):
		return "(redacted)"
	}
	if _, found := secrets.Scan(s); found || memory.ScanKey("name", s) != nil {
		return "(redacted)"
	}
	return s
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// limiter holds a rate limiter per token.
type limiter struct {
	rate  rate.Limit
	burst int

	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

// newLimiter allows r requests a second to each key, up to burst at once.
func newLimiter(r float64, burst int) *limiter {
	return &limiter{rate: rate.Limit(r), burst: max(burst, 1), keys: map[string]*rate.Limiter{}}
}

// forget drops key's limiter.
func (l *limiter) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}

// allow takes one request of key's, or says how long until one would be
// allowed.
func (l *limiter) allow(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	lim, ok := l.keys[key]
	if !ok {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.keys[key] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}
