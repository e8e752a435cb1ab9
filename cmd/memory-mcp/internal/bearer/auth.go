// Package bearer guards the team server's HTTP endpoint: it checks each
// request's Host and Origin, and its bearer token against the store, keeps each token to its rate
// and its tenant, caps and times request bodies, and logs every request
// without its arguments. It knows nothing of MCP beyond the JSON-RPC
// method it logs; it imports memory and secrets, and golang.org/x/time/rate.
package bearer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/secrets"
)

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

// Tokens is where a Guard looks tokens up: the store.
type Tokens interface {
	// Authenticate returns the live token whose secret is given, or
	// memory.ErrNotFound.
	Authenticate(ctx context.Context, secret string) (memory.Token, error)
}

// Guard checks the host and origin of, authenticates, rate-limits, caps
// and times the body of, and logs every request before it reaches the
// handler it wraps.
type Guard struct {
	Hosts   Hosts
	Tokens  Tokens
	Limiter *Limiter
	Tenant  string        // "": every tenant's tokens
	Timeout time.Duration // to read a request's body, once its header is in
	MaxBody int           // bytes of a request body
	// MaxSessions caps the sessions one token holds open at once: each
	// costs memory until its client ends it or it idles out, and a client
	// that opens them without end must not exhaust the server. Sessions
	// counts them.
	MaxSessions int
	Sessions    func(tokenID string) int
	Log         *slog.Logger
	Redact      func(error) error // takes the database's password out of an error

	inflight atomic.Int64 // requests being answered, not counting event streams
}

// Inflight counts the requests being answered, not counting event streams.
func (g *Guard) Inflight() int64 { return g.inflight.Load() }

type tokenKey struct{}

// TokenFrom is the token a guarded request bore.
func TokenFrom(ctx context.Context) (memory.Token, bool) {
	tok, ok := ctx.Value(tokenKey{}).(memory.Token)
	return tok, ok
}

// Wrap guards next.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		var tokID, method, tool string
		defer func() {
			g.Log.Info("request", "token", tokID, "http", r.Method, "method", method, "tool", tool,
				"status", sw.status, "ms", time.Since(start).Milliseconds())
		}()
		if r.Method != http.MethodGet {
			g.inflight.Add(1)
			defer g.inflight.Add(-1)
		}
		if why := g.Hosts.check(r); why != "" {
			http.Error(sw, why, http.StatusForbidden)
			return
		}
		f := strings.Fields(r.Header.Get("Authorization"))
		if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
			unauthorized(sw, false)
			return
		}
		tok, err := g.Tokens.Authenticate(r.Context(), f[1])
		if errors.Is(err, memory.ErrNotFound) {
			unauthorized(sw, true)
			return
		}
		if err != nil {
			g.Log.Warn("authenticate", "err", g.Redact(err))
			sw.Header().Set("Retry-After", "1")
			http.Error(sw, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		tokID = tok.ID
		if g.Tenant != "" && tok.Tenant != g.Tenant {
			http.Error(sw, "this server serves another team", http.StatusForbidden)
			return
		}
		if wait, ok := g.Limiter.allow(tok.ID, time.Now()); !ok {
			sw.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(sw, "too many requests", http.StatusTooManyRequests)
			return
		}
		if r.Body != nil && r.Method == http.MethodPost {
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(g.Timeout))
			body, err := io.ReadAll(io.LimitReader(r.Body, int64(g.MaxBody)+1))
			if err != nil {
				// The deadline stays passed, so the server does not wait
				// for the rest of the body before answering.
				sw.Header().Set("Connection", "close")
				http.Error(sw, "could not read the request", http.StatusRequestTimeout)
				return
			}
			rc.SetReadDeadline(time.Time{})
			if len(body) > g.MaxBody {
				http.Error(sw, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			method, tool = peek(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if method == "initialize" && r.Header.Get("Mcp-Session-Id") == "" && g.Sessions(tok.ID) >= g.MaxSessions {
				sw.Header().Set("Retry-After", "60")
				http.Error(sw, "too many open sessions for this token: close some, or wait for idle ones to end", http.StatusTooManyRequests)
				return
			}
		}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
	})
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
	return LogName(m.Method), LogName(tool)
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,64}$`)

// LogName is a method or tool name a client gave, fit for the log. Real
// names are short and plain; anything else is not repeated, nor is a name
// shaped like a token or any other secret (a client that pasted one in the
// wrong place must not have it written down).
func LogName(s string) string {
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
