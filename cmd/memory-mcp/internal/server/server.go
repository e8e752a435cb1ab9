// Package server serves an App over MCP: the tools, resources and prompts,
// the middleware that gives every failure a stable code, the stdio
// transport (its line filter in package stdio), and the team server over
// Streamable HTTP (its bearer tokens checked by package bearer). It
// imports the MCP SDK, memory and its subpackages, mirror, weave, scope,
// secrets and the internal packages stdio, bearer and schema, never
// package main.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/mirror"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/weave"
)

// Server is the MCP face of an App: its tools, resources and prompts.
type Server struct {
	app  *App
	mcp  *mcp.Server
	impl *mcp.Implementation
	log  *slog.Logger

	mu   sync.Mutex
	subs map[string]int // subscribed URIs, counted over sessions

	kick chan struct{} // asks for the instructions to be recomputed
}

const guide = `memory-mcp keeps what this team learned, decided and agreed, across sessions.
- At the start of a task call memory_read with no key (pass query: the task) for the woven recall block.
- Before writing, memory_search or memory_list to avoid duplicates.
- Save durable facts and decisions as semantic, repeatable how-tos as procedural, task scratch as working; scope project unless it is true everywhere (system).
- Never store secrets: they are refused.
- At the end of a session, memory_capture with what was planned, what happened, rules the user stated and tool sequences that worked.`

// instructionsBudget caps the initialize instructions, guide and index together.
const instructionsBudget = 500

// New returns the MCP server of a, logging to log.
func New(a *App, log *slog.Logger) *Server {
	srv := &Server{app: a, log: log, subs: map[string]int{}, kick: make(chan struct{}, 1)}
	srv.impl = &mcp.Implementation{Name: "memory-mcp", Title: "memory-mcp", Version: a.Version}
	srv.mcp = mcp.NewServer(srv.impl, &mcp.ServerOptions{
		Instructions:       guide,
		Logger:             quieter(log),
		SubscribeHandler:   srv.subscribe,
		UnsubscribeHandler: srv.unsubscribe,
		CompletionHandler:  srv.complete,
		SetCacheable:       cacheHints,
		// The tools, prompts and resources are fixed when the server
		// starts: their lists never change, so no client need listen.
		Capabilities: &mcp.ServerCapabilities{
			Logging:   &mcp.LoggingCapabilities{},
			Tools:     &mcp.ToolCapabilities{},
			Prompts:   &mcp.PromptCapabilities{},
			Resources: &mcp.ResourceCapabilities{Subscribe: true},
		},
	})
	srv.mcp.AddReceivingMiddleware(srv.recoverer, srv.instructions, srv.argumentErrors, quietNotFound)
	srv.addTools(srv.mcp)
	srv.addResources(srv.mcp)
	srv.addPrompts(srv.mcp)
	return srv
}

// toolAdder is where tools are registered: an SDK server.
type toolAdder interface {
	AddTool(*mcp.Tool, mcp.ToolHandler)
}

// quieter is log for the SDK: its per-session chatter is debug detail to
// us, so only its warnings and errors pass at the default level.
func quieter(log *slog.Logger) *slog.Logger {
	return slog.New(minLevel{log.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// Handle passes r on, except the SDK's error that its run was cancelled:
// that is the server stopping on a signal, which is no error.
func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "server run cancelled" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}
func (h minLevel) WithGroup(n string) slog.Handler { return minLevel{h.Handler.WithGroup(n), h.min} }

// recoverer turns a panic in any handler into an error for that request,
// so one bad call never ends the session.
func (srv *Server) recoverer(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				srv.log.Error("panic in handler", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if method == "tools/call" {
					r := &mcp.CallToolResult{}
					r.SetError(fmt.Errorf("internal: the server hit a bug handling this call (%v); nothing was changed by the failed step", p))
					res, err = r, nil
					return
				}
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("internal error: %v", p)}
			}
		}()
		return next(ctx, method, req)
	}
}

// argumentErrors gives the SDK's own argument validation failures the
// invalid_argument code every other bad argument gets.
func (srv *Server) argumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError && len(r.Content) == 1 {
			if t, ok := r.Content[0].(*mcp.TextContent); ok && !hasCode(t.Text) {
				t.Text = "invalid_argument: " + t.Text
			}
		}
		return res, err
	}
}

func hasCode(s string) bool {
	for _, c := range []memory.Code{memory.CodeInvalidArgument, memory.CodeNotFound, memory.CodeConflict,
		memory.CodeSecretRejected, memory.CodeTooLarge, memory.CodeInternal} {
		if strings.HasPrefix(s, string(c)+":") {
			return true
		}
	}
	return false
}

// instructions puts the index into the initialize result. The tokenizer
// that caps it takes longer to load than initialize may wait, so the text
// comes from the database, where a server saved it after its last change;
// without one, the guide says how many memories there are.
func (srv *Server) instructions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			r.Instructions = srv.instructionsText(ctx)
		case *mcp.DiscoverResult:
			r.Instructions = srv.instructionsText(ctx)
		}
		return res, err
	}
}

const instructionsCache = "instructions"

func (srv *Server) instructionsText(ctx context.Context) string {
	if text, ok, err := srv.app.Store.Cached(ctx, srv.app.Project, instructionsCache); err == nil && ok {
		return text
	}
	n, err := srv.app.Store.CountAll(ctx, srv.app.Project)
	if err != nil || n == 0 {
		return guide
	}
	return fmt.Sprintf("%s\n\nThis project has %d memories: read memory://index for the list.", guide, n)
}

// refreshInstructions recomputes the capped instructions, if the
// tokenizer is loaded, and saves them for the next initialize.
func (srv *Server) refreshInstructions(ctx context.Context) {
	if !srv.app.Weaver.Ready() {
		return
	}
	stamp, err := srv.app.Store.CacheStamp(ctx, srv.app.Project)
	if err != nil {
		srv.log.Warn("index for instructions", "err", err)
		return
	}
	// The index lists types in weave.IndexTypes order, each in weave order,
	// so the head of that order is all a capped index can show.
	var recs []memory.Record
	for _, t := range weave.IndexTypes {
		if len(recs) >= indexRowsAtInit {
			break
		}
		rs, err := srv.app.Store.Effective(ctx, srv.app.Project, []memory.Type{t}, indexRowsAtInit-len(recs))
		if err != nil {
			srv.log.Warn("index for instructions", "err", err)
			return
		}
		recs = append(recs, rs...)
	}
	total, err := srv.app.Store.CountAll(ctx, srv.app.Project)
	if err != nil {
		srv.log.Warn("index for instructions", "err", err)
		return
	}
	text := guide
	budget := instructionsBudget - srv.app.Weaver.Count(guide+"\n\n")
	if idx, _ := srv.app.Weaver.Index(recs, budget, total-len(recs)); idx != "" {
		text = guide + "\n\n" + idx
	}
	if err := srv.app.Store.SetCachedAt(ctx, srv.app.Project, instructionsCache, text, stamp); err != nil {
		srv.log.Warn("save instructions", "err", err)
	}
}

// instructionsLoop keeps the saved instructions current. They are read
// only by servers starting later, so a burst of changes makes one refresh
// once it has settled (refreshQuiet without a change, or refreshMaxDelay
// after the first), not one per change: a refresh reads the index and the
// counts, which would otherwise compete with the calls that caused it.
//
// A refresh needs the tokenizer, whose tables are most of a small
// server's memory, so it waits until something else has loaded it (a
// recall). Changes not yet in the saved instructions when the server
// stops are refreshed one last time on its way out, loading the tokenizer
// then if need be, so the next session starts with them.
func (srv *Server) instructionsLoop(ctx context.Context) {
	// A database that has records but no saved instructions (filled by the
	// command line, an import, or an older version) gets them too.
	dirty := false
	if _, ok, err := srv.app.Store.Cached(ctx, srv.app.Project, instructionsCache); err == nil && !ok {
		n, err := srv.app.Store.CountAll(ctx, srv.app.Project)
		dirty = err == nil && n > 0
	}
	poll := time.NewTicker(refreshPoll)
	defer poll.Stop()
	for {
		if dirty && srv.app.Weaver.Ready() {
			srv.refreshInstructions(ctx)
			dirty = false
		}
		// Look for the tokenizer only while a refresh waits for it.
		var waiting <-chan time.Time
		if dirty {
			waiting = poll.C
		}
		select {
		case <-ctx.Done():
			select {
			case <-srv.kick:
				dirty = true
			default:
			}
			if dirty {
				srv.finalRefresh(ctx)
			}
			return
		case <-waiting:
			continue
		case <-srv.kick:
		}
		dirty = true
		if !settle(ctx, srv.kick, refreshQuiet, refreshMaxDelay) {
			srv.finalRefresh(ctx)
			return
		}
	}
}

// finalRefresh refreshes the instructions after ctx has ended, loading
// the tokenizer if need be.
func (srv *Server) finalRefresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if !srv.app.Weaver.Ready() {
		srv.app.Weaver.Preload()
		srv.app.noteTokenizer("the instructions")
	}
	srv.refreshInstructions(ctx)
}

const (
	refreshQuiet    = 250 * time.Millisecond
	refreshMaxDelay = 2 * time.Second
	// refreshPoll is how often a server with unsaved changes looks whether
	// the tokenizer has been loaded.
	refreshPoll = 500 * time.Millisecond
)

// settle waits until quiet has passed without a signal on kick, or max
// since it was called. It reports false if ctx ended first.
func settle(ctx context.Context, kick <-chan struct{}, quiet, max time.Duration) bool {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	idle := time.NewTimer(quiet)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return true
		case <-idle.C:
			return true
		case <-kick:
			idle.Reset(quiet)
		}
	}
}

// indexRowsAtInit bounds the records read for the instructions' index: a
// row costs eight tokens or more, whatever its cells, so no more than this
// fit in the cap. They are read with their bodies, so it is kept tight.
const indexRowsAtInit = instructionsBudget / 8

func (srv *Server) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	srv.mu.Lock()
	srv.subs[req.Params.URI]++
	srv.mu.Unlock()
	return nil
}

func (srv *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	srv.mu.Lock()
	if srv.subs[req.Params.URI]--; srv.subs[req.Params.URI] <= 0 {
		delete(srv.subs, req.Params.URI)
	}
	srv.mu.Unlock()
	return nil
}

// changed tells subscribers of the index, the recall block and the record
// that they may read something new.
func (srv *Server) changed(ctx context.Context, recs ...memory.Record) {
	uris := []string{"memory://index", "memory://recall"}
	for _, r := range recs {
		uris = append(uris, recordURI(r))
	}
	srv.mu.Lock()
	var send []string
	for _, u := range uris {
		if srv.subs[u] > 0 {
			send = append(send, u)
		}
	}
	srv.mu.Unlock()
	select {
	case srv.kick <- struct{}{}:
	default: // a refresh is due already
	}
	for _, u := range send {
		if err := srv.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: u}); err != nil {
			srv.log.Warn("notify", "uri", u, "err", err)
		}
	}
}

// purgeLoop deletes expired records now and then; reads already hide them.
func (srv *Server) purgeLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := srv.app.Purge(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				srv.log.Warn("purge", "err", err)
			} else if n > 0 {
				srv.log.Info("purged expired records", "count", n)
			}
		}
	}
}

func (srv *Server) addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{
		URI: "memory://index", Name: "index", Title: "Memory index", MIMEType: "text/markdown",
		Description: "A markdown table of every effective memory: key, description, type, scope.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if _, err := srv.sync(ctx); err != nil {
			return nil, resourceError(err)
		}
		recs, err := srv.app.Store.Index(ctx, srv.app.Project, 0)
		if err != nil {
			return nil, resourceError(err)
		}
		md, _ := srv.app.Weaver.Index(recs, 0, 0)
		return markdown(req.Params.URI, md), nil
	})
	s.AddResource(&mcp.Resource{
		URI: "memory://recall", Name: "recall", Title: "Recall block", MIMEType: "text/markdown",
		Description: "The woven recall block: the project's most useful facts and procedures within the token budget.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if _, err := srv.sync(ctx); err != nil {
			return nil, resourceError(err)
		}
		b, err := srv.app.Recall(ctx, "", nil, 0)
		if err != nil {
			return nil, resourceError(err)
		}
		return markdown(req.Params.URI, b.Markdown), nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "memory://{scope}/{type}/{key}", Name: "record", Title: "One memory", MIMEType: "text/markdown",
		Description: "One memory in full, at exactly that scope, type and key.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		rest, ok := strings.CutPrefix(uri, "memory://")
		parts := strings.Split(rest, "/")
		if !ok || len(parts) != 3 {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		l, err := scope.Parse(parts[0])
		if err != nil {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		t, err := memory.ParseType("type", parts[1])
		if err != nil {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if _, err := srv.sync(ctx); err != nil {
			return nil, resourceError(err)
		}
		rec, err := srv.app.Store.Get(ctx, srv.app.Project, memory.Selector{Key: parts[2], Type: t, Scope: &l})
		if errors.Is(err, memory.ErrNotFound) || errors.Is(err, memory.ErrInvalidArgument) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, resourceError(err)
		}
		return markdown(uri, recordText(rec)), nil
	})
}

func markdown(uri, text string) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: text}}}
}

// resourceError gives a resource failure a JSON-RPC code; a plain error
// would go out as code 0.
func resourceError(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: toolError(err).Error()}
}

func (srv *Server) addPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{
		Name: "recall", Title: "Recall project memory",
		Description: "The woven recall block of this project's facts and procedures, ready to read before a task.",
		Arguments: []*mcp.PromptArgument{
			{Name: "query", Description: "what the task is about; relevant memories come first"},
			{Name: "max_tokens", Description: "token budget (default 1500)"},
		},
	}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		max := 0
		if v := req.Params.Arguments["max_tokens"]; v != "" {
			if _, err := fmt.Sscan(v, &max); err != nil || max < 0 {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid_argument: max_tokens must be a whole number"}
			}
		}
		if _, err := srv.sync(ctx); err != nil {
			return nil, resourceError(err)
		}
		b, err := srv.app.Recall(ctx, req.Params.Arguments["query"], nil, max)
		if err != nil {
			return nil, resourceError(err)
		}
		text := b.Markdown
		if text == "" && max == 0 {
			text = "No project memory yet."
		}
		return &mcp.GetPromptResult{
			Description: "Project memory",
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
		}, nil
	})
}

// sync brings in the markdown files and tells subscribers when that changed
// anything.
func (srv *Server) sync(ctx context.Context) (mirror.Report, error) {
	rep, err := srv.app.Sync(ctx)
	if err == nil && len(rep.Imported)+len(rep.Renamed)+len(rep.Deleted) > 0 {
		srv.changed(ctx)
	}
	return rep, err
}

// MCP is the SDK server, for connecting a transport of one's own.
func (srv *Server) MCP() *mcp.Server { return srv.mcp }
